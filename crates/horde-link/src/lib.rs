//! The impaired network both of Horde's ways of emulating one share, and the emulated link.
//!
//! - `impairment.rs`: the draws (loss, delay ± jitter, duplicates, reordering) from a seeded
//!   stream. The engine applies them to its own UDP and KCP datagrams (`scenario.network`);
//! - `bottleneck.rs`: a rate-limited link, one way (a token bucket and its drop-tail queue): the
//!   engine's `scenario.network.rate_limit` and the link's `--rate-mbit`;
//! - `tun.rs`, `relay.rs`, `link.rs`: the link (`horde link`), for TCP and any protocol: a
//!   network namespace reached through two TUN devices, whose IP packets a relay thread delays,
//!   drops, duplicates and reorders in user space with the same draws (behind a bottleneck of a
//!   given rate if asked), both ways, so that the kernel's own TCP sees real loss and
//!   retransmits. Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN: the namespace, the devices,
//!   their addresses).
//!
//! ```text
//!  generator (this namespace)                         the namespace (horde-link-PID-N)
//!  10.77.B.1 ─▶ hlPID-No ══ relay: Impairment out ══▶ hlPID-Ni ─▶ 10.77.B.2 (the target)
//!            ◀─          ◀═        Impairment back ══           ◀─
//! ```

pub mod bottleneck;
pub mod impairment;
mod link;
mod relay;
pub mod tun;

pub use bottleneck::Bottleneck;
pub use impairment::{Impairment, Random};
pub use link::{Link, LinkError, LinkStats, NAMESPACE_PREFIX};
pub use relay::Shaping;
