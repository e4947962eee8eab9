//! `TCP_NODELAY` for the PostgreSQL peer's connections.
//!
//! sqlx 0.9.0 does not set `TCP_NODELAY` on any connection (launchbadge/sqlx#4335); the sqlmq
//! library works around it for the MySQL pools it builds, and the PostgreSQL peer must get the
//! same treatment or it would be measured with Nagle's algorithm holding back its writes. sqlx
//! offers no socket hook, so after each connection is established this sets the option on every
//! TCP socket of the process whose peer port is the server's (harmless on any other socket to
//! that port). Remove it with the library's own workaround when sqlx ships the fix.

/// Set `TCP_NODELAY` on every TCP socket of this process whose peer port is `port`; returns
/// how many sockets were changed.
#[cfg(target_os = "linux")]
pub fn apply(port: u16) -> usize {
    use std::os::fd::BorrowedFd;

    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    let mut changed = 0;
    for entry in dir.flatten() {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        // SAFETY: `fd` was listed as open a moment ago and is only borrowed for the
        // getsockopt/setsockopt calls below. If it is closed meanwhile the calls fail with EBADF
        // (ignored); if its number is reused, the worst outcome is TCP_NODELAY on another socket
        // to the same port, which is harmless.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let sock = socket2::SockRef::from(&fd);
        let to_port = sock
            .peer_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .is_some_and(|a| a.port() == port);
        if to_port && sock.tcp_nodelay().is_ok_and(|on| !on) && sock.set_tcp_nodelay(true).is_ok() {
            changed += 1;
        }
    }
    changed
}

/// Elsewhere the workaround is not available.
#[cfg(not(target_os = "linux"))]
pub fn apply(_port: u16) -> usize {
    0
}
