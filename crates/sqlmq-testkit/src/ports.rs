//! Loopback ports for private servers, taken outside the kernel's ephemeral range.
//!
//! Why not `bind("127.0.0.1:0")`: the kernel hands that port out of its ephemeral range
//! (`net.ipv4.ip_local_port_range`, 32768–60999 on Linux), the same range every outgoing
//! connection's local port comes from. A port found free and released again is then up for
//! grabs by any client connection until the server binds it, which may be seconds later (a
//! Galera joiner's state-transfer port is bound only once the node before it has synced) or
//! after a restart; the server then fails to start (seen as a joiner's rsync daemon dying under
//! three concurrent clusters). Below the ephemeral range only listeners take ports, and the
//! ones handed out here are not handed out twice by one process.

use std::sync::atomic::{AtomicU32, Ordering};

/// The ports handed out: `[FIRST, FIRST + SPAN)`, below Linux's default ephemeral range.
const FIRST: u32 = 20_000;
const SPAN: u32 = 12_000;

/// The next port to try, as an offset from `FIRST` (a random start per process, so that
/// concurrent test binaries rarely try the same ports).
static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);

/// A loopback TCP port free now, outside the ephemeral range, never returned twice by this
/// process (until all 12 000 have been).
///
/// ```
/// let (a, b) = (sqlmq_testkit::free_port(), sqlmq_testkit::free_port());
/// assert_ne!(a, b);
/// assert!(std::net::TcpListener::bind(("127.0.0.1", a)).is_ok());
/// ```
pub fn free_port() -> u16 {
    let _ = NEXT.compare_exchange(
        u32::MAX,
        rand::random::<u32>() % SPAN,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..SPAN {
        let port = (FIRST + NEXT.fetch_add(1, Ordering::Relaxed) % SPAN) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {FIRST}..{}", FIRST + SPAN);
}
