//! Work around sqlx 0.9.0 not setting `TCP_NODELAY` on its connections (MySQL here; the bench
//! uses it for its PostgreSQL peer too).
//!
//! sqlx 0.9.0 lost the `TCP_NODELAY` option (launchbadge/sqlx#4335, fixed on its main branch by
//! #4336 but not released). Without it, Nagle's algorithm holds back the tail of any request
//! larger than one segment, or a write that follows another without a reply in between, until the
//! server's delayed ACK arrives: about 40 ms on Linux. Multi-row INSERTs of a batch enqueue are
//! such requests, so every chunk of a batch would stall for 40 ms.
//!
//! sqlx offers no hook to set socket options, so after each connection is established this scans
//! the process's open file descriptors for TCP sockets connected to the database's port and sets
//! `TCP_NODELAY` on them. It only ever turns Nagle off, on sockets to that port; doing so on a
//! socket of another client to the same port is harmless. Remove this module when sqlx ships the
//! fix (any 0.9.x > 0.9.0).

/// Set `TCP_NODELAY` on every TCP socket of this process whose peer port is `port`.
/// Returns how many sockets were changed.
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
        // getsockopt/setsockopt calls below. If another thread closes it in between, the calls
        // fail with EBADF (ignored); if the number is reused meanwhile, the worst outcome is
        // TCP_NODELAY on another socket to the same port, which is harmless.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let sock = socket2::SockRef::from(&fd);
        let to_db = sock
            .peer_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .is_some_and(|a| a.port() == port);
        if to_db && sock.tcp_nodelay().is_ok_and(|on| !on) && sock.set_tcp_nodelay(true).is_ok() {
            changed += 1;
        }
    }
    changed
}

/// On other systems the workaround is not available; unix sockets (`?socket=`) avoid Nagle.
#[cfg(not(target_os = "linux"))]
pub fn apply(_port: u16) -> usize {
    0
}

/// How many TCP sockets of this process to `port` have Nagle still enabled (for tests).
#[cfg(all(target_os = "linux", test))]
pub(crate) fn sockets_without_nodelay(port: u16) -> usize {
    use std::os::fd::BorrowedFd;
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()))
        .filter(|&fd| {
            // SAFETY: as in `apply`.
            let fd = unsafe { BorrowedFd::borrow_raw(fd) };
            let sock = socket2::SockRef::from(&fd);
            sock.peer_addr()
                .ok()
                .and_then(|a| a.as_socket())
                .is_some_and(|a| a.port() == port)
                && sock.tcp_nodelay().is_ok_and(|on| !on)
        })
        .count()
}

#[cfg(all(target_os = "linux", test))]
mod tests {
    use super::*;

    #[test]
    fn sets_nodelay_on_sockets_to_the_port_only() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (server_side, _) = listener.accept().unwrap();
        assert!(!client.nodelay().unwrap());
        assert_eq!(sockets_without_nodelay(port), 1);
        assert!(apply(port) >= 1);
        assert!(client.nodelay().unwrap());
        // the accepted socket's peer is the client's ephemeral port, not `port`
        assert!(!server_side.nodelay().unwrap());
        assert_eq!(sockets_without_nodelay(port), 0);
    }
}
