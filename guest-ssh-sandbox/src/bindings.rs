//! The WIT bindings of the `ssh-sandbox-backend` world, generated in this one place.
//! Generated code uses `unsafe` for the canonical ABI and emits its own `pub` items.
#![allow(unsafe_code, unreachable_pub, missing_docs)]

wit_bindgen::generate!({
    world: "ssh-sandbox-backend",
    path: "../wit",
});
