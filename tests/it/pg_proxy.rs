//! A TCP proxy in front of PostgreSQL that a test controls, to take the database away from a
//! running server without touching the shared PostgreSQL cluster:
//!
//! - [`PgProxy::cut`]: every connection is closed and new ones are refused (the port is
//!   closed), as when the server stops or restarts;
//! - [`PgProxy::blackhole`]: connections stay open and nothing gets through, in either
//!   direction, ever again on those connections; new ones are accepted and hang the same way.
//!   This is a network partition as the client sees it: no error, only silence;
//! - [`PgProxy::restore`]: new connections are forwarded again. Connections black-holed before
//!   stay dead (until a cut), so the client has to notice and open new ones.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Forward,
    Down,
    Blackhole,
}

/// The proxy; dropping it closes everything.
pub struct PgProxy {
    addr: SocketAddr,
    mode: watch::Sender<Mode>,
    accept: tokio::task::JoinHandle<()>,
}

impl PgProxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let (mode, modes) = watch::channel(Mode::Forward);
        let accept = tokio::spawn(accept_loop(listener, addr, upstream, modes));
        Self { addr, mode, accept }
    }

    /// Starts a proxy to the server of `url` (a `postgres://` URL).
    pub async fn in_front_of(url: &str) -> Self {
        let parsed = url::Url::parse(url).expect("database URL");
        let host = parsed.host_str().expect("database host");
        let port = parsed.port().unwrap_or(5432);
        let upstream = tokio::net::lookup_host((host, port))
            .await
            .expect("resolve the database host")
            .next()
            .expect("an address for the database host");
        Self::start(upstream).await
    }

    /// `url` with its host and port replaced by the proxy's.
    pub fn url_for(&self, url: &str) -> String {
        let mut parsed = url::Url::parse(url).expect("database URL");
        parsed
            .set_host(Some(&self.addr.ip().to_string()))
            .expect("set host");
        parsed.set_port(Some(self.addr.port())).expect("set port");
        parsed.to_string()
    }

    /// Closes every connection and refuses new ones.
    pub fn cut(&self) {
        self.mode.send_replace(Mode::Down);
    }

    /// Stops every byte, keeping connections open.
    pub fn blackhole(&self) {
        self.mode.send_replace(Mode::Blackhole);
    }

    /// Forwards new connections again.
    pub fn restore(&self) {
        self.mode.send_replace(Mode::Forward);
    }
}

impl Drop for PgProxy {
    fn drop(&mut self) {
        // Connection tasks end when the mode channel closes with the sender.
        self.mode.send_replace(Mode::Down);
        self.accept.abort();
    }
}

/// Accepts while the proxy is up; while it is down the port is closed, so connecting is
/// refused as it is by a stopped server.
async fn accept_loop(
    listener: TcpListener,
    addr: SocketAddr,
    upstream: SocketAddr,
    mut modes: watch::Receiver<Mode>,
) {
    let mut listener = Some(listener);
    loop {
        let mode = *modes.borrow_and_update();
        if mode == Mode::Down {
            listener = None;
        } else if listener.is_none() {
            listener = Some(rebind(addr).await);
        }
        match &listener {
            None => {
                if modes.changed().await.is_err() {
                    return;
                }
            }
            Some(l) => tokio::select! {
                accepted = l.accept() => {
                    if let Ok((client, _)) = accepted {
                        tokio::spawn(connection(client, upstream, modes.clone()));
                    }
                }
                changed = modes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            },
        }
    }
}

/// Listens on the same port again (the clients' URL names it).
async fn rebind(addr: SocketAddr) -> TcpListener {
    let mut last = None;
    for _ in 0..50 {
        let socket = TcpSocket::new_v4().expect("socket");
        socket.set_reuseaddr(true).expect("SO_REUSEADDR");
        match socket.bind(addr).and_then(|()| socket.listen(128)) {
            Ok(l) => return l,
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("cannot listen on {addr} again: {last:?}");
}

/// Forwards one client connection until either side closes or the proxy is cut or
/// black-holed.
async fn connection(mut client: TcpStream, upstream: SocketAddr, mut modes: watch::Receiver<Mode>) {
    let mode = *modes.borrow_and_update();
    match mode {
        Mode::Forward => {}
        Mode::Down => return,
        Mode::Blackhole => return hold(client, None, modes).await,
    }
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (mut up, mut down) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    loop {
        tokio::select! {
            n = client.read(&mut up) => match n {
                Ok(0) | Err(_) => return,
                Ok(n) => if server.write_all(&up[..n]).await.is_err() { return },
            },
            n = server.read(&mut down) => match n {
                Ok(0) | Err(_) => return,
                Ok(n) => if client.write_all(&down[..n]).await.is_err() { return },
            },
            changed = modes.changed() => {
                if changed.is_err() {
                    return;
                }
                let mode = *modes.borrow_and_update();
                match mode {
                    Mode::Forward => {}
                    Mode::Down => return,
                    Mode::Blackhole => return hold(client, Some(server), modes).await,
                }
            }
        }
    }
}

/// Keeps a black-holed connection open, silent, until the proxy is cut or dropped.
async fn hold(_client: TcpStream, _server: Option<TcpStream>, mut modes: watch::Receiver<Mode>) {
    while modes.changed().await.is_ok() {
        if *modes.borrow_and_update() == Mode::Down {
            return;
        }
    }
}
