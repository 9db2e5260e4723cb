//! The packaging, checked without building anything (fast, in `make test`): pyproject.toml
//! builds a maturin binary wheel of this crate that depends on ipykernel, and `cargo install`
//! installs the kernel-mcp binary alone. The wheel itself is tested by `make wheel-test`
//! (tests/it/wheel_install.rs).

use std::path::Path;

fn read(name: &str) -> toml_edit::DocumentMut {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    text.parse()
        .unwrap_or_else(|e| panic!("{name} is not TOML: {e}"))
}

#[test]
fn pyproject_builds_a_maturin_bin_wheel_named_and_versioned_like_the_crate() {
    let py = read("pyproject.toml");
    let cargo = read("Cargo.toml");
    assert_eq!(
        py["build-system"]["build-backend"].as_str(),
        Some("maturin")
    );
    assert_eq!(py["tool"]["maturin"]["bindings"].as_str(), Some("bin"));
    assert_eq!(
        py["project"]["name"].as_str(),
        cargo["package"]["name"].as_str()
    );
    // The version comes from Cargo.toml: declared dynamic, never written twice.
    let dynamic: Vec<&str> = py["project"]["dynamic"]
        .as_array()
        .expect("project.dynamic")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert!(dynamic.contains(&"version"), "{dynamic:?}");
    assert!(py["project"].get("version").is_none());
    assert!(cargo["package"]["version"].as_str().is_some());
}

#[test]
fn pyproject_requires_python_310_and_depends_on_ipykernel() {
    let py = read("pyproject.toml");
    assert_eq!(py["project"]["requires-python"].as_str(), Some(">=3.10"));
    let deps: Vec<&str> = py["project"]["dependencies"]
        .as_array()
        .expect("project.dependencies")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert!(
        deps.iter().any(|d| d.starts_with("ipykernel")),
        "the wheel must bring a Python kernel: {deps:?}"
    );
}

#[test]
fn cargo_install_builds_only_kernel_mcp() {
    // Every [[bin]] besides src/main.rs must need a feature, so a plain `cargo install`
    // (and maturin's wheel, built without features) carries kernel-mcp alone.
    let cargo = read("Cargo.toml");
    if let Some(bins) = cargo.get("bin").and_then(|b| b.as_array_of_tables()) {
        for bin in bins.iter() {
            let name = bin["name"].as_str().unwrap_or("?");
            assert!(
                bin.get("required-features").is_some(),
                "binary {name} would be installed by `cargo install`"
            );
        }
    }
    let extra = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bin");
    for entry in std::fs::read_dir(&extra).into_iter().flatten().flatten() {
        let stem = entry
            .path()
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let declared = cargo
            .get("bin")
            .and_then(|b| b.as_array_of_tables())
            .is_some_and(|bins| bins.iter().any(|b| b["name"].as_str() == Some(&stem)));
        assert!(declared, "src/bin/{stem}.rs is an auto-discovered binary");
    }
}
