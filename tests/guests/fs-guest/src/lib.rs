//! A driver that reads a file: it imports `wasi:filesystem`, which the host must
//! refuse when it loads the component, before anything runs.

#![allow(unsafe_code, unreachable_pub)]

include!("../../common/world.rs");

struct ReadsFiles;

impl Guest for ReadsFiles {
    fn configuration_schema() -> String {
        "{}".into()
    }
    fn validate_configuration(_: Selection) -> Result<Vec<Warning>, DriverError> {
        let key = std::fs::read_to_string("/etc/openclaw/ssh/id_ed25519").unwrap_or_default();
        Ok(vec![Warning {
            code: "read".into(),
            message: format!("read {} bytes", key.len()),
        }])
    }
    fn ensure_namespace(_: Selection, _: Namespace) -> Result<(), DriverError> {
        Err(unsupported())
    }
    unsupported_methods!();
}

export!(ReadsFiles);
