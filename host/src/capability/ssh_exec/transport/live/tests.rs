//! The connect and run rules that need no host.

use super::connect::*;
use super::*;

/// What ssh prints when sshd drops a connection before authentication
/// (seen on a stock sshd with 20 connections at once) is told apart from
/// a refused port, identity or host key.
#[test]
fn a_drop_before_authentication_is_told_apart() {
    for dropped in [
        "kex_exchange_identification: read: Connection reset by peer\r\nConnection reset by 10.201.5.2 port 22",
        "kex_exchange_identification: Connection closed by remote host\r\nConnection closed by 10.201.5.2 port 22",
    ] {
        assert!(dropped_before_auth(dropped), "{dropped}");
    }
    for other in [
        "ssh: connect to host 10.201.5.2 port 22: Connection refused",
        "ssh: connect to host 192.0.2.1 port 22: Connection timed out",
        "root@10.201.5.2: Permission denied (publickey).\r\nConnection closed by 10.201.5.2 port 22",
        "Host key verification failed.",
    ] {
        assert!(!dropped_before_auth(other), "{other}");
    }
}

/// The wait after each failed connect in a row: the first delay, doubled
/// each time, never past the cap; a first delay equal to the cap is a
/// fixed wait (the compute world's).
#[test]
fn connects_back_off_exponentially_up_to_the_cap() {
    let ms = Duration::from_millis;
    let waits: Vec<_> = (1..=7)
        .map(|n| backoff_after(n, ms(250), ms(5000)))
        .collect();
    assert_eq!(
        waits,
        [
            ms(250),
            ms(500),
            ms(1000),
            ms(2000),
            ms(4000),
            ms(5000),
            ms(5000)
        ]
    );
    assert_eq!(backoff_after(u32::MAX, ms(250), ms(5000)), ms(5000));
    assert_eq!(backoff_after(1, ms(5000), ms(5000)), ms(5000));
    assert_eq!(backoff_after(9, ms(5000), ms(5000)), ms(5000));
}

/// Two backends in one process (two drivers opened side by side) each get
/// their own control directory: dropping one leaves the other's sockets
/// and credential files where they were.
#[test]
fn each_backend_owns_its_control_directory() {
    let first = LiveSsh::new(SshGrant::none()).unwrap();
    let second = LiveSsh::new(SshGrant::none()).unwrap();
    assert_ne!(first.control_dir, second.control_dir);
    let kept = second.control_dir.clone();
    let dropped = first.control_dir.clone();
    drop(first);
    assert!(!dropped.exists(), "{}", dropped.display());
    assert!(
        kept.is_dir(),
        "{} went with the other backend",
        kept.display()
    );
    assert!(second.config_file.is_file());
}
