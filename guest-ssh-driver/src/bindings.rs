//! The WIT bindings of the `ssh-compute-driver@0.4.0` world, generated in this one place.
//! Generated code uses `unsafe` for the canonical ABI and emits its own `pub` items.
#![allow(unsafe_code, unreachable_pub, missing_docs)]

wit_bindgen::generate!({
    world: "occ:compute/ssh-compute-driver@0.4.0",
    path: ["../wit/0.2.0", "../wit/0.3.0", "../wit/0.4.0"],
    // The 0.2.0 interfaces whose types the 0.3.0 and 0.4.0 ones use.
    generate_all,
});
