//! The trusted Installation document: read from a file, an inherited
//! descriptor or stdin within a size bound, and its YAML parsed with duplicate
//! keys refused and with bounds on aliases, depth and size, so that a hostile
//! or broken document (an alias bomb) fails with a message instead of
//! exhausting memory. Each world parses its own selection of it:
//! `drivers.compute` in [`crate::world::ssh_compute_driver::installation`],
//! `drivers.sandbox` in [`crate::world::ssh_sandbox_backend::installation`].

use std::path::Path;

use serde_json::Value;

use crate::error::LoadError;

/// Where a component comes from when neither the caller nor the document names one.
pub const COMPONENT_ENV: &str = "OCC_DRIVER_COMPONENT";

/// Installation documents are kilobytes; a megabyte is a mistake or an attack.
const MAX_DOCUMENT_BYTES: u64 = 1 << 20;

/// Whether `path` names an inherited descriptor (`/dev/fd/N` above 2, or
/// `/dev/stdin`): a pipe a client handed the document through, so that
/// credentials in it touch no disk. It can be read once only, so its text is
/// kept for the process.
fn descriptor(path: &Path) -> Option<i32> {
    if path == Path::new("/dev/stdin") {
        return Some(0);
    }
    path.strip_prefix("/dev/fd")
        .or_else(|_| path.strip_prefix("/proc/self/fd"))
        .ok()
        .and_then(|n| n.to_str()?.parse::<i32>().ok())
        .filter(|n| *n > 2)
}

/// The inherited descriptor `n`, taken over to be read once and closed. A
/// pipe opens by its `/dev/fd` name, but a socket (what Node.js hands a
/// child as a "pipe") does not (ENXIO), so the descriptor is read itself.
#[allow(unsafe_code)]
fn take_descriptor(n: i32) -> std::io::Result<std::fs::File> {
    use std::os::fd::{FromRawFd, OwnedFd};
    // Open at all? (stat through /proc follows it to the pipe or socket.)
    std::fs::metadata(format!("/proc/self/fd/{n}"))?;
    // SAFETY: `n` is open (checked above) and was inherited from the parent
    // for this one purpose: nothing else in this process owns it, and the
    // document read from it is kept (see `read_text`), so it is taken once.
    Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(n) }))
}

/// The text of an installation document, within the size bound.
/// The text read from an inherited descriptor, kept for the process (it can
/// be read once only).
static DESCRIPTOR_TEXT: std::sync::Mutex<Option<(std::path::PathBuf, String)>> =
    std::sync::Mutex::new(None);

/// Take `text` as what `/dev/stdin` holds, for a caller that read stdin
/// itself because it carries more than the installation (`call -i /dev/stdin
/// -p @-`). Refused past the size limit of an installation document.
pub fn stdin_document(text: String) -> Result<(), LoadError> {
    let path = Path::new("/dev/stdin");
    if text.len() as u64 > MAX_DOCUMENT_BYTES {
        return Err(LoadError::Installation {
            path: path.to_path_buf(),
            message: format!(
                "larger than the {MAX_DOCUMENT_BYTES}-byte limit of an installation document"
            ),
        });
    }
    *DESCRIPTOR_TEXT.lock().unwrap_or_else(|p| p.into_inner()) = Some((path.to_path_buf(), text));
    Ok(())
}

pub(crate) fn read_text(path: &Path) -> Result<String, LoadError> {
    let err = |message: String| LoadError::Installation {
        path: path.to_path_buf(),
        message,
    };
    if let Some(n) = descriptor(path) {
        use std::io::Read;
        let mut read = DESCRIPTOR_TEXT.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((p, text)) = read.as_ref()
            && p == path
        {
            return Ok(text.clone());
        }
        let mut text = String::new();
        take_descriptor(n)
            .and_then(|f| f.take(MAX_DOCUMENT_BYTES + 1).read_to_string(&mut text))
            .map_err(|e| err(format!("cannot read: {e}")))?;
        if text.len() as u64 > MAX_DOCUMENT_BYTES {
            return Err(err(format!(
                "larger than the {MAX_DOCUMENT_BYTES}-byte limit of an installation document"
            )));
        }
        *read = Some((path.to_path_buf(), text.clone()));
        return Ok(text);
    }
    let size = std::fs::metadata(path)
        .map_err(|e| err(format!("cannot read: {e}")))?
        .len();
    if size > MAX_DOCUMENT_BYTES {
        return Err(err(format!(
            "{size} bytes is larger than the {MAX_DOCUMENT_BYTES}-byte limit of an installation document"
        )));
    }
    std::fs::read_to_string(path).map_err(|e| err(format!("cannot read: {e}")))
}

/// Read and parse an installation document (YAML, with the bounds described
/// in the module documentation) as JSON, for callers that must see which
/// selections it holds before opening one.
pub fn read_document(path: &Path) -> Result<Value, LoadError> {
    parse_document(path, &read_text(path)?)
}

/// Installation text (`path`'s, for errors) as a JSON document.
pub(crate) fn parse_document(path: &Path, text: &str) -> Result<Value, LoadError> {
    parse_yaml(text).map_err(|e| LoadError::Installation {
        path: path.to_path_buf(),
        message: format!("not valid YAML: {e}"),
    })
}

/// YAML to JSON with the bounds described in the module documentation.
pub(crate) fn parse_yaml(text: &str) -> Result<Value, String> {
    use serde_saphyr::options::DuplicateKeyPolicy;
    let mut budget = serde_saphyr::Budget::default();
    budget.max_documents = 1;
    let options = serde_saphyr::options! {
        duplicate_keys: DuplicateKeyPolicy::Error,
        budget: Some(budget),
    };
    serde_saphyr::from_str_with_options::<Value>(text, options).map_err(|e| e.to_string())
}
