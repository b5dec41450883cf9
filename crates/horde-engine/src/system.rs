//! What the engine asks of the operating system: its own CPU time, and the open-file limit.
#![allow(unsafe_code)]

use std::time::Duration;

/// CPU time (user + system) this process has used so far, all threads included.
pub fn process_cpu_time() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we own; RUSAGE_SELF is always valid.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return Duration::ZERO;
        }
        usage
    };
    let micros = |time: libc::timeval| time.tv_sec as u64 * 1_000_000 + time.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

/// Raises the soft open-file limit to the hard one (every connection is a file descriptor) and
/// returns the limit now in force.
pub fn raise_open_file_limit() -> u64 {
    // SAFETY: getrlimit/setrlimit read and write a struct we own.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return raised.rlim_cur;
            }
        }
        limit.rlim_cur
    }
}

/// Asks Linux to pick a bound socket's port when it connects rather than when it binds
/// (IP_BIND_ADDRESS_NO_PORT): bound to port 0, each socket would otherwise hold a port of its
/// source address for every destination, and one address would run out after ~28,000
/// connections whatever the targets. Best effort: elsewhere, or if refused, bind picks the port.
pub fn defer_port_choice(socket: &impl std::os::fd::AsRawFd) {
    #[cfg(target_os = "linux")]
    // SAFETY: setsockopt reads an int we own, on a descriptor the socket owns and keeps open.
    unsafe {
        let enable: libc::c_int = 1;
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            std::ptr::addr_of!(enable).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    #[cfg(not(target_os = "linux"))]
    let _ = socket;
}
