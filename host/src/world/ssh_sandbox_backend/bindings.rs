//! The `ssh-sandbox-backend` world's exports; its imports are the capabilities'
//! bindings, generated once in each capability's module.
#![allow(missing_docs, unreachable_pub)]

wasmtime::component::bindgen!({
    path: "../wit/0.2.0",
    world: "ssh-sandbox-backend",
    imports: { default: async },
    exports: { default: async },
    with: {
        "occ:compute/types": crate::capability::hooks::bindings::occ::compute::types,
        "occ:compute/ssh-exec": crate::capability::ssh_exec::bindings::occ::compute::ssh_exec,
        "occ:compute/local-workspace": crate::capability::local_workspace::bindings::occ::compute::local_workspace,
        "occ:compute/log": crate::capability::log::bindings::occ::compute::log,
    },
});
