//! The one place the host runs the bindings generator over `wit/`.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "ssh-compute-driver",
    imports: { default: async },
    exports: { default: async },
    additional_derives: [PartialEq],
});
