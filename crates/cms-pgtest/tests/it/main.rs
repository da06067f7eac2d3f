//! The harness itself: a server starts, serves fresh databases, stops,
//! comes back on the same port, and leaves nothing behind.

use std::net::{Ipv4Addr, TcpStream};
use std::time::{Duration, Instant};

use cms_pgtest::PgServer;

fn accepts(port: u16) -> bool {
    TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok()
}

#[test]
fn a_server_starts_stops_restarts_and_goes() {
    let started = Instant::now();
    let server = PgServer::start();
    eprintln!("started in {:?}", started.elapsed());
    let port = server.port();
    assert!(accepts(port));
    let first = server.database();
    let second = server.database();
    assert_ne!(first, second);
    assert!(first.starts_with(&format!("postgres://postgres@127.0.0.1:{port}/")), "{first}");

    server.stop();
    assert!(!server.is_running());
    assert!(!accepts(port), "a stopped server refuses connections");
    server.restart();
    assert!(server.is_running());
    assert_eq!(server.port(), port, "the same port after a restart");
    server.database();

    let directory = server.directory().to_path_buf();
    assert!(directory.join("log").is_file());
    drop(server);
    assert!(!accepts(port), "a dropped server is stopped");
    let deadline = Instant::now() + Duration::from_secs(30);
    while directory.exists() {
        assert!(Instant::now() < deadline, "{} is still there", directory.display());
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_shared_server_is_one_per_process() {
    let a = PgServer::shared();
    let b = PgServer::shared();
    assert!(std::ptr::eq(a, b));
    assert_ne!(a.database(), b.database());
}
