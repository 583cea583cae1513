//! The `ssh-compute-driver` world's exports; its imports are the capabilities'
//! bindings, generated once in each capability's module.
#![allow(missing_docs, unreachable_pub)]

wasmtime::component::bindgen!({
    path: "../wit/0.2.0",
    world: "ssh-compute-driver",
    imports: { default: async },
    exports: { default: async },
    with: {
        "occ:compute/types": crate::capability::hooks::bindings::occ::compute::types,
        "occ:compute/lifecycle-hooks": crate::capability::hooks::bindings::occ::compute::lifecycle_hooks,
        "occ:compute/ssh-exec": crate::capability::ssh_exec::bindings::occ::compute::ssh_exec,
        "occ:compute/log": crate::capability::log::bindings::occ::compute::log,
    },
});

/// The `agent-runtime` export of a 0.4.0 driver, looked up beside the
/// contract: a component without it still loads.
pub mod runtime {
    wasmtime::component::bindgen!({
        path: ["../wit/0.2.0", "../wit/0.3.0", "../wit/0.4.0"],
        world: "occ:compute/agent-runtime-export@0.4.0",
        exports: { default: async },
        with: {
            "occ:compute/types": crate::capability::hooks::bindings::occ::compute::types,
        },
    });
}
