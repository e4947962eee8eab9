//! A TCP proxy between the code under test and the database server that drops, resets and
//! stalls connections on command — and can let a COMMIT through while swallowing its reply, the
//! one moment whose outcome a client cannot know.
//!
//! The proxy forwards bytes as they come. To find a COMMIT it looks at the start of each chunk
//! the client writes for a MySQL `COM_QUERY` packet (4-byte header, command byte `0x03`) whose
//! text begins with `COMMIT`, or ends with `;COMMIT`: sqlx sends COMMIT as a plain query on its
//! own, after the reply to the previous statement, so it always starts a chunk, and sqlmq's
//! one-round-trip send is one text query that ends with its COMMIT. A lone send, a claim and a
//! lone ack are prepared `CALL`s of sqlmq's internal procedures (`…send_plain(…)`,
//! `…claim_vt(…)` or an older client's `…claim_timed(…)`, `…claim_plain(…)`; `…ack_plain(…)`), which commit: the proxy notes the statement id the server
//! gives such a statement when it is prepared (`COM_STMT_PREPARE`, `0x16`, answered by an OK
//! packet carrying the id) and counts its executions (`COM_STMT_EXECUTE`, `0x17`, with that id)
//! as COMMITs. Plain connections only (not TLS).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What to do to a connection now.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fate {
    Carry,
    /// Close both sides (FIN): the client reads end of file.
    Drop,
    /// Close the client's side with a reset (RST).
    Reset,
}

#[derive(Default)]
struct State {
    /// One sender per open connection.
    conns: Mutex<Vec<watch::Sender<Fate>>>,
    /// Forward nothing (either way) while set.
    stalled: watch::Sender<bool>,
    /// Let the next COMMIT through and cut its connection before the reply.
    cut_after_commit: AtomicBool,
    /// With `cut_after_commit`: how long the COMMIT stays on its way to the server after the
    /// client's side is closed (zero: it is sent first).
    commit_delay: Mutex<Duration>,
    /// COMMITs cut so far.
    cut: AtomicUsize,
    /// Close new connections at once (the server "is down").
    refuse: AtomicBool,
    /// Spread new connections over the targets in turn instead of preferring the first.
    round_robin: bool,
    /// Connections accepted so far (where the next round-robin turn starts).
    accepted: AtomicUsize,
    /// Deliver a chunk the server writes in two parts, the second this much later: the one
    /// after this many others.
    split_reply: Mutex<Option<(usize, Duration)>>,
}

/// A proxy on a loopback port of its own, forwarding to `target`; stops when dropped.
///
/// ```no_run
/// # async fn f() {
/// let proxy = sqlmq_testkit::Proxy::start("127.0.0.1:3306".parse().unwrap()).await;
/// let url = proxy.url("mysql://app:pw@127.0.0.1:3306/db"); // …@127.0.0.1:<proxy port>/db
/// proxy.drop_all(); // every open connection is closed
/// # let _ = url; }
/// ```
pub struct Proxy {
    addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listen on a free loopback port.
    pub async fn start(target: SocketAddr) -> Proxy {
        Proxy::start_any(vec![target]).await
    }

    /// Listen on a free loopback port and send each new connection to the first of `targets`
    /// that accepts it: what a load balancer in front of a cluster does when a node dies
    /// (HAProxy's `first` balancing, for one).
    ///
    /// ```no_run
    /// # async fn f() {
    /// let nodes = vec!["127.0.0.1:3307".parse().unwrap(), "127.0.0.1:3308".parse().unwrap()];
    /// let proxy = sqlmq_testkit::Proxy::start_any(nodes).await;
    /// # let _ = proxy; }
    /// ```
    pub async fn start_any(targets: Vec<SocketAddr>) -> Proxy {
        Proxy::listen(targets, false).await
    }

    /// Listen on a free loopback port and send new connections to `targets` in turn (skipping
    /// those that refuse): a load balancer spreading a client's connections over a cluster's
    /// nodes (HAProxy's `roundrobin`).
    ///
    /// ```no_run
    /// # async fn f() {
    /// let nodes = vec!["127.0.0.1:3307".parse().unwrap(), "127.0.0.1:3308".parse().unwrap()];
    /// let proxy = sqlmq_testkit::Proxy::start_round_robin(nodes).await;
    /// # let _ = proxy; }
    /// ```
    pub async fn start_round_robin(targets: Vec<SocketAddr>) -> Proxy {
        Proxy::listen(targets, true).await
    }

    async fn listen(targets: Vec<SocketAddr>, round_robin: bool) -> Proxy {
        let targets = Arc::new(targets);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State {
            round_robin,
            ..State::default()
        });
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if shared.refuse.load(Ordering::SeqCst) {
                    continue; // dropped: closed at once
                }
                let (fate, watch) = watch::channel(Fate::Carry);
                shared.conns.lock().unwrap().push(fate);
                tokio::spawn(carry(client, targets.clone(), watch, shared.clone()));
            }
        });
        Proxy { addr, state, task }
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `url` with its host and port replaced by the proxy's.
    pub fn url(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").expect("URL with a scheme");
        let (user, host_and_path) = match rest.rsplit_once('@') {
            Some((user, rest)) => (format!("{user}@"), rest),
            None => (String::new(), rest),
        };
        let path = host_and_path.find('/').map_or("", |i| &host_and_path[i..]);
        format!("{scheme}://{user}{}{path}", self.addr)
    }

    fn fate(&self, fate: Fate) {
        let mut conns = self.state.conns.lock().unwrap();
        for conn in conns.iter() {
            let _ = conn.send(fate);
        }
        conns.clear();
    }

    /// Close every open connection (both sides see end of file).
    pub fn drop_all(&self) {
        self.fate(Fate::Drop);
    }

    /// Reset every open connection (the client sees a connection reset).
    pub fn reset_all(&self) {
        self.fate(Fate::Reset);
    }

    /// Stop forwarding bytes (both ways, every connection) until [`Proxy::resume`].
    pub fn stall(&self) {
        self.state.stalled.send_replace(true);
    }

    /// Forward again after [`Proxy::stall`].
    pub fn resume(&self) {
        self.state.stalled.send_replace(false);
    }

    /// Let the next COMMIT reach the server, then close its connection before the reply.
    pub fn cut_after_next_commit(&self) {
        *self.state.commit_delay.lock().expect("poisoned") = Duration::ZERO;
        self.state.cut_after_commit.store(true, Ordering::SeqCst);
    }

    /// Close the client's side of the connection that sends the next COMMIT at once, and
    /// deliver that COMMIT (with whatever statements share its packet) to the server `delay`
    /// later: the client has lost the connection while its COMMIT is still on its way, so
    /// whatever it asks on another connection meanwhile arrives first.
    pub fn cut_before_next_commit_arrives(&self, delay: Duration) {
        *self.state.commit_delay.lock().expect("poisoned") = delay;
        self.state.cut_after_commit.store(true, Ordering::SeqCst);
    }

    /// How many COMMITs were cut so far.
    pub fn commits_cut(&self) -> usize {
        self.state.cut.load(Ordering::SeqCst)
    }

    /// Deliver a chunk the server writes (on any connection) in two parts — the one after the
    /// next `skip` chunks: its first six bytes (a packet's header and the start of its body) at
    /// once, the rest `hold` later. Meanwhile the client reading that reply is half-way through
    /// a packet: a caller that gives up on it then leaves its connection in the middle of the
    /// reply.
    ///
    /// ```no_run
    /// # async fn f(proxy: sqlmq_testkit::Proxy) {
    /// // The reply after the next one (a BEGIN's, say) comes in two parts, a second apart.
    /// proxy.split_reply(1, std::time::Duration::from_secs(1));
    /// # }
    /// ```
    pub fn split_reply(&self, skip: usize, hold: Duration) {
        *self.state.split_reply.lock().expect("poisoned") = Some((skip, hold));
    }

    /// Close new connections at once while `on` (as if the server were down).
    pub fn refuse(&self, on: bool) {
        self.state.refuse.store(on, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        self.drop_all();
    }
}

/// The server address a database URL names (`localhost` as `127.0.0.1`, port 3306 when none).
///
/// ```
/// let addr = sqlmq_testkit::address_of("mysql://u:p@localhost/db");
/// assert_eq!(addr.to_string(), "127.0.0.1:3306");
/// ```
pub fn address_of(url: &str) -> SocketAddr {
    let rest = url.split_once("://").expect("URL with a scheme").1;
    let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    let host = host.split(['/', '?']).next().unwrap_or(host);
    let host = host.replace("localhost", "127.0.0.1");
    let host = if host.contains(':') {
        host
    } else {
        format!("{host}:3306")
    };
    host.parse().expect("the URL's host is an IP address")
}

/// Where [`Proxy::split_reply`] splits a reply: after a packet's 4-byte header and 2 bytes
/// of its body.
const SPLIT_AT: usize = 6;

/// The prepared statements of one connection that commit (see the module's doc).
#[derive(Default)]
struct Prepared {
    /// A `CALL` of an internal procedure was sent to be prepared; its answer carries its id.
    awaiting: bool,
    committing: Vec<u32>,
}

impl Prepared {
    /// Note a chunk the client writes.
    fn sent(&mut self, chunk: &[u8]) {
        if chunk.len() > 5 && chunk[4] == 0x16 {
            let text = String::from_utf8_lossy(&chunk[5..]).to_ascii_lowercase();
            self.awaiting = text.trim_start().starts_with("call")
                && [
                    "send_plain(",
                    "claim_plain(",
                    "claim_timed(",
                    "claim_vt(",
                    "ack_plain(",
                ]
                .iter()
                .any(|p| text.contains(p));
        }
    }

    /// Note a chunk the server writes: the answer to a prepare awaited.
    fn answered(&mut self, chunk: &[u8]) {
        if !std::mem::take(&mut self.awaiting) {
            return;
        }
        if chunk.len() >= 9 && chunk[4] == 0x00 {
            let id = u32::from_le_bytes([chunk[5], chunk[6], chunk[7], chunk[8]]);
            self.committing.push(id);
        }
    }

    /// Whether a chunk the client writes executes a statement that commits.
    fn commits(&self, chunk: &[u8]) -> bool {
        chunk.len() >= 9
            && chunk[4] == 0x17
            && self.committing.contains(&u32::from_le_bytes([
                chunk[5], chunk[6], chunk[7], chunk[8],
            ]))
    }
}

/// Whether a chunk written by the client starts with a `COM_QUERY` packet that commits: a
/// COMMIT on its own, or a multi-statement query that ends with one (sqlmq's one-round-trip
/// send), whole in the chunk.
fn is_commit(chunk: &[u8]) -> bool {
    if chunk.len() < 11 || chunk[4] != 0x03 {
        return false;
    }
    let len = usize::from(chunk[0]) | usize::from(chunk[1]) << 8 | usize::from(chunk[2]) << 16;
    let text = &chunk[5..chunk.len().min(4 + len)];
    let ends = |t: &[u8]| t.len() >= 7 && t[t.len() - 7..].eq_ignore_ascii_case(b";COMMIT");
    text[..6].eq_ignore_ascii_case(b"COMMIT") || (chunk.len() >= 4 + len && ends(text))
}

/// Wait while the proxy is stalled.
async fn unstalled(state: &State) {
    let mut stalled = state.stalled.subscribe();
    let _ = stalled.wait_for(|s| !*s).await;
}

/// Forward one connection until either side closes or its fate changes.
async fn carry(
    client: TcpStream,
    targets: Arc<Vec<SocketAddr>>,
    mut fate: watch::Receiver<Fate>,
    state: Arc<State>,
) {
    let first = if state.round_robin {
        state.accepted.fetch_add(1, Ordering::SeqCst) % targets.len()
    } else {
        0
    };
    let mut server = None;
    for target in targets.iter().cycle().skip(first).take(targets.len()) {
        if let Ok(s) = TcpStream::connect(target).await {
            server = Some(s);
            break;
        }
    }
    let Some(server) = server else {
        return;
    };
    // A second handle on the client's socket, to set a zero linger on it for a reset after
    // the halves are gone into the forwarding futures.
    let Ok((client, spare)) = client
        .into_std()
        .and_then(|c| Ok((c.try_clone()?, c)))
        .and_then(|(c, spare)| Ok((TcpStream::from_std(c)?, spare)))
    else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let cut = Arc::new(tokio::sync::Notify::new());
    let swallow = Arc::new(AtomicBool::new(false));
    let prepared = Arc::new(Mutex::new(Prepared::default()));
    let upstream = {
        let (state, cut, swallow) = (state.clone(), cut.clone(), swallow.clone());
        let prepared = prepared.clone();
        async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match client_read.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                unstalled(&state).await;
                let commits = {
                    let mut prepared = prepared.lock().expect("poisoned");
                    prepared.sent(&buf[..n]);
                    is_commit(&buf[..n]) || prepared.commits(&buf[..n])
                };
                let cut_here = commits && state.cut_after_commit.swap(false, Ordering::SeqCst);
                if cut_here {
                    // No byte of the reply may reach the client from now on.
                    swallow.store(true, Ordering::SeqCst);
                    let delay = *state.commit_delay.lock().expect("poisoned");
                    if !delay.is_zero() {
                        // Close the client's side now (returning ends the connection's
                        // task) and let a task of its own deliver the COMMIT later, holding
                        // the server's side open until the server has read it.
                        let commit = buf[..n].to_vec();
                        tokio::spawn(async move {
                            tokio::time::sleep(delay).await;
                            let _ = server_write.write_all(&commit).await;
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        });
                        state.cut.fetch_add(1, Ordering::SeqCst);
                        return;
                    }
                }
                if server_write.write_all(&buf[..n]).await.is_err() {
                    return;
                }
                if cut_here {
                    // The server reads the COMMIT before the end of file that follows, so it
                    // commits; the client never hears of it.
                    state.cut.fetch_add(1, Ordering::SeqCst);
                    cut.notify_one();
                    std::future::pending::<()>().await;
                }
            }
        }
    };
    let downstream = {
        let (state, swallow) = (state.clone(), swallow.clone());
        let prepared = prepared.clone();
        async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match server_read.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                unstalled(&state).await;
                prepared.lock().expect("poisoned").answered(&buf[..n]);
                let split = {
                    let mut split = state.split_reply.lock().expect("poisoned");
                    match *split {
                        Some((0, hold)) if n > SPLIT_AT => split.take().map(|_| hold),
                        Some((skip, hold)) if skip > 0 => {
                            *split = Some((skip - 1, hold));
                            None
                        }
                        _ => None,
                    }
                };
                if let Some(hold) = split
                    && !swallow.load(Ordering::SeqCst)
                {
                    if client_write.write_all(&buf[..SPLIT_AT]).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(hold).await;
                    if client_write.write_all(&buf[SPLIT_AT..n]).await.is_err() {
                        return;
                    }
                    continue;
                }
                if swallow.load(Ordering::SeqCst)
                    || client_write.write_all(&buf[..n]).await.is_err()
                {
                    return;
                }
            }
        }
    };
    tokio::pin!(upstream, downstream);
    let mut downstream_done = false;
    loop {
        tokio::select! {
            _ = &mut upstream => return,
            _ = &mut downstream, if !downstream_done => downstream_done = true,
            _ = cut.notified() => return, // the reply is never forwarded
            changed = fate.changed() => {
                let now = *fate.borrow();
                match (changed, now) {
                    (Err(_), _) | (_, Fate::Drop) => return,
                    (_, Fate::Reset) => {
                        // Closing a socket with a zero linger sends RST instead of FIN.
                        if let Ok(spare) = TcpStream::from_std(spare) {
                            let _ = spare.set_zero_linger();
                        }
                        return;
                    }
                    (_, Fate::Carry) => {}
                }
            }
        }
    }
}
