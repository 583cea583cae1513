//! Serving on stdio or on a Unix socket.
//!
//! The socket is private from the moment it exists: it is bound inside a fresh
//! directory of mode 0700, made 0600, and only then moved to its path. Every
//! connection's peer must be this user (checked with `SO_PEERCRED`), whatever
//! the socket's mode. An `accept` error is logged and the server goes on.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::connection::serve_connection;
use super::service::Service;
use crate::uid::current_uid;

/// Serve JSON-RPC on this process's stdin and stdout until stdin closes.
pub async fn serve_stdio(service: Arc<dyn Service>) -> std::io::Result<()> {
    serve_connection(service, tokio::io::stdin(), tokio::io::stdout()).await
}

/// Bind a Unix socket at `path` that no other user can ever connect to. An
/// existing socket file is replaced; any other file at `path` is refused.
pub fn bind_private(path: &Path) -> std::io::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists and is not a socket; refusing to replace it",
                    path.display()
                ),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // tempfile makes the directory 0700 with an unpredictable name.
    let staging = tempfile::Builder::new()
        .prefix(".occ-socket-")
        .tempdir_in(parent)?;
    let staged = staging.path().join("s");
    let listener = tokio::net::UnixListener::bind(&staged)?;
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))?;
    std::fs::rename(&staged, path)?;
    Ok(listener)
}

/// Serve JSON-RPC on a socket [`bind_private`] bound at `path`, one task per
/// connection, until the process is stopped.
pub async fn serve_listener(
    service: Arc<dyn Service>,
    listener: tokio::net::UnixListener,
    path: &Path,
) -> std::io::Result<()> {
    tracing::info!(socket = %path.display(), "serving JSON-RPC");
    let uid = current_uid();
    let mut connections = tokio::task::JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // EMFILE and friends pass; the server must not end on them.
                tracing::warn!("accept on {}: {e}", path.display());
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        match stream.peer_cred() {
            Ok(cred) if cred.uid() == uid => {}
            Ok(cred) => {
                tracing::warn!(
                    "refused a connection on {} from uid {}: only uid {uid} may connect",
                    path.display(),
                    cred.uid()
                );
                continue;
            }
            Err(e) => {
                tracing::warn!(
                    "refused a connection on {}: no peer credentials: {e}",
                    path.display()
                );
                continue;
            }
        }
        let service = service.clone();
        connections.spawn(async move {
            let (r, w) = stream.into_split();
            if let Err(e) = serve_connection(service, r, w).await {
                tracing::warn!("connection ended: {e}");
            }
        });
    }
}
