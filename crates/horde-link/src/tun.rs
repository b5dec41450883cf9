//! TUN devices: `/dev/net/tun` opened and named with `TUNSETIFF` (`IFF_TUN | IFF_NO_PI`: each
//! read and write is one IP packet, no header), non-blocking, in this namespace or in another
//! one. A device opened this way is not persistent: it disappears when its descriptor closes,
//! so a link killed outright leaves no device behind.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// `TUNSETIFF`: `_IOW('T', 202, int)`.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

/// An open TUN device: its descriptor, and its name.
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
    name: String,
}

impl Tun {
    /// Creates the TUN device `name` in the calling thread's network namespace.
    pub fn open(name: &str) -> io::Result<Self> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a device name has 1 to 15 bytes: {name:?}"),
            ));
        }
        let path = CString::new("/dev/net/tun").map_err(io::Error::other)?;
        // SAFETY: open reads a NUL-terminated path we own; the descriptor it returns is ours.
        let raw = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: ifreq is plain data; the name is copied within its IFNAMSIZ bytes (checked
        // above), the flags written into the union's first member; the ioctl reads the struct.
        unsafe {
            let mut request: libc::ifreq = std::mem::zeroed();
            for (slot, byte) in request.ifr_name.iter_mut().zip(name.bytes()) {
                *slot = byte as libc::c_char;
            }
            request.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
            if libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &request) < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(Self { fd, name: name.to_owned() })
    }

    /// Creates the TUN device `name` inside the network namespace at `namespace` (a file such
    /// as `/run/netns/NAME`): a thread of its own enters it (`setns`) and opens the device there;
    /// the device stays in that namespace, its descriptor works from any.
    pub fn open_in(namespace: &Path, name: &str) -> io::Result<Self> {
        let namespace = File::open(namespace)?;
        let name = name.to_owned();
        std::thread::Builder::new()
            .name("horde-link-ns".into())
            .spawn(move || {
                // SAFETY: setns on a namespace file we hold open changes only this thread's
                // network namespace; the thread ends right after.
                if unsafe { libc::setns(namespace.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                Self::open(&name)
            })?
            .join()
            .map_err(|_| io::Error::other("the thread opening a TUN device panicked"))?
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// One packet into `buffer`; `WouldBlock` when none is waiting.
    pub fn read(&self, buffer: &mut [u8]) -> io::Result<usize> {
        // SAFETY: read writes at most buffer.len() bytes into the buffer we borrow mutably.
        let read = unsafe { libc::read(self.fd.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len()) };
        if read < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(read as usize)
        }
    }

    /// One packet out of the device, into its namespace's stack.
    pub fn write(&self, packet: &[u8]) -> io::Result<usize> {
        // SAFETY: write reads packet.len() bytes of the slice we borrow.
        let written = unsafe { libc::write(self.fd.as_raw_fd(), packet.as_ptr().cast(), packet.len()) };
        if written < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(written as usize)
        }
    }
}

impl AsRawFd for Tun {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}
