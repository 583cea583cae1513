//! What the sandbox costs: compile, cached load, per-call instantiation and a
//! contract call that does no SSH, each beside the same policy function called
//! natively (the driver crate compiled into this benchmark) as a ratio.
//!
//!   cargo guest && cargo bench -p occ-driver-host --bench overhead
//!
//! Figures are medians of repeated runs on whatever else the machine is doing;
//! the ratios, measured in the same run, are the figures to compare.

#[path = "../tests/support/mod.rs"]
mod support;
use support::median;

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use occ_driver_host::{
    CallOptions, ComponentCache, Driver, DriverOptions, Installation, Limits, Method, Runtime,
};
use serde_json::json;

fn configuration() -> serde_json::Value {
    json!({
        "ssh": {"identityFile": "/etc/openclaw/ssh/id_ed25519", "knownHostsFile": "/etc/openclaw/ssh/known_hosts", "connectTimeoutSeconds": 10},
        "hosts": {"stable": {"address": "203.0.113.10", "port": 22, "user": "root", "nodePath": "/usr/bin/node", "openclawPath": "/opt/openclaw/current/dist/index.js"}},
        "runtime": {"nodePath": "/usr/bin/node", "openclawPath": "/opt/openclaw/current/dist/index.js", "user": "openclaw", "root": "/var/lib/openclaw-enterprise", "systemdUnitDirectory": "/etc/systemd/system"},
        "network": {"gatewayPortRange": {"start": 18800, "end": 18899}},
    })
}

/// Median per-iteration time over `rounds` rounds of `per_round` iterations.
fn per_iteration(rounds: usize, per_round: u32, mut f: impl FnMut()) -> Duration {
    let samples = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..per_round {
                f();
            }
            t.elapsed() / per_round
        })
        .collect();
    median(samples)
}

fn show(name: &str, d: Duration, native: Duration) {
    let ratio = d.as_secs_f64() / native.as_secs_f64();
    println!(
        "{name:<44} {:>12.3} us   {:>12.1}x native",
        d.as_secs_f64() * 1e6,
        ratio
    );
}

fn main() {
    let component = support::component("guest_ssh_driver");
    let config = configuration();
    let config_text = config.to_string();

    // The baseline: the driver's own validate-configuration, compiled natively.
    let native = per_iteration(21, 20_000, || {
        black_box(
            guest_ssh_driver::lifecycle::validate_configuration(black_box(&config_text)).is_ok(),
        );
    });

    let runtime = Arc::new(Runtime::new(Limits::default()).unwrap());
    let compile = median(
        (0..5)
            .map(|_| runtime.compile(&component, None).unwrap().load_time)
            .collect(),
    );
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = ComponentCache::open(cache_dir.path().join("cache")).unwrap();
    runtime.compile(&component, Some(&cache)).unwrap();
    let cached = median(
        (0..21)
            .map(|_| {
                let c = runtime.compile(&component, Some(&cache)).unwrap();
                assert!(c.from_cache);
                c.load_time
            })
            .collect(),
    );

    let installation = Installation {
        path: PathBuf::from("bench-installation.yaml"),
        driver_id: "compute-ssh".into(),
        implementation: "occ/ssh".into(),
        approved_helpers: Vec::new(),
        component: component.clone(),
        max_sessions: occ_driver_host::capability::ssh_exec::grant::DEFAULT_MAX_SESSIONS,
        configuration: config,
    };
    let driver = Driver::open(
        runtime.clone(),
        installation,
        &DriverOptions {
            cache: Some(cache),
            ..Default::default()
        },
    )
    .unwrap();
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let instantiate = per_iteration(21, 200, || {
        tokio.block_on(driver.instantiate_only()).unwrap()
    });
    let call = per_iteration(21, 200, || {
        let r = tokio.block_on(driver.call_json(
            Method::ValidateConfiguration,
            &json!({}),
            CallOptions::default(),
        ));
        black_box(r.unwrap());
    });

    // What admitting the shipped helper costs an exec: hashing it, as every
    // exec did before approval was decided at load, against recognizing it by
    // its text, as it is now.
    let (helper, _) = driver.helper().expect("the driver ships its helper");
    let sent = helper.to_vec();
    let hashed = per_iteration(21, 200, || {
        black_box(occ_ssh_target::digest::sha256_hex(black_box(&sent)));
    });
    let recognized = per_iteration(21, 200, || {
        black_box(black_box(helper) == black_box(sent.as_slice()));
    });

    println!(
        "component: {} ({} bytes)",
        component.display(),
        std::fs::metadata(&component).unwrap().len()
    );
    println!("{:<44} {:>15}   {:>19}", "measure", "median", "ratio");
    show("native validate-configuration (baseline)", native, native);
    show("compile component (no cache)", compile, native);
    show("load precompiled component from cache", cached, native);
    show("fresh store + instance per call", instantiate, native);
    show("validateConfiguration through the sandbox", call, native);
    println!(
        "sandbox overhead per no-SSH call: {:.1} us ({:.1}x the policy itself)",
        (call.saturating_sub(native)).as_secs_f64() * 1e6,
        call.as_secs_f64() / native.as_secs_f64()
    );
    println!(
        "admitting the shipped helper ({} bytes) at an exec: hashed {:.1} us, recognized by its text {:.1} us ({:.0}x less)",
        helper.len(),
        hashed.as_secs_f64() * 1e6,
        recognized.as_secs_f64() * 1e6,
        hashed.as_secs_f64() / recognized.as_secs_f64()
    );
}
