//! `leaf certs` as a user runs it: the built binary writes a CA, a node and a client
//! certificate into a directory, prints exactly the files it wrote (never a key), refuses to
//! overwrite without `--force`, and says what to run when the directory has no CA.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use leaf_api::identity::CertIdentity;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use x509_parser::extensions::GeneralName;

fn leaf(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_leaf")).args(args).output().expect("run leaf");
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!all.contains("PRIVATE KEY"), "key material printed: {all}");
    out
}

/// Runs `leaf certs ARGS --dir DIR`; its stdout lines when it succeeds.
fn certs_ok(dir: &Path, args: &[&str]) -> Vec<PathBuf> {
    let dir = dir.to_str().unwrap();
    let out = leaf(&[&["certs"], args, &["--dir", dir]].concat());
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(PathBuf::from).collect()
}

/// Runs `leaf certs ARGS --dir DIR` expecting exit 2; its stderr.
fn certs_refused(dir: &Path, args: &[&str]) -> String {
    let dir = dir.to_str().unwrap();
    let out = leaf(&[&["certs"], args, &["--dir", dir]].concat());
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stdout));
    assert!(out.stdout.is_empty());
    String::from_utf8(out.stderr).unwrap()
}

fn identity(path: &Path) -> Option<CertIdentity> {
    let der = CertificateDer::from_pem_file(path).unwrap();
    let (_, x509) = x509_parser::parse_x509_certificate(&der).unwrap();
    let san = x509.subject_alternative_name().unwrap().unwrap();
    CertIdentity::from_uris(san.value.general_names.iter().filter_map(|n| match n {
        GeneralName::URI(u) => Some(*u),
        _ => None,
    }))
}

#[test]
fn leaf_certs_writes_a_ca_and_the_certificates_it_signs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("certs");

    let help = leaf(&["certs", "--help"]);
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(help.contains("development") && help.contains("deploy/README.md"), "{help}");

    // No CA yet: refused, with the command to run.
    let err = certs_refused(&dir, &["node", "--id", "1", "--host", "localhost"]);
    assert!(err.contains(&format!("run `leaf certs ca --dir {}` first", dir.display())), "{err}");

    assert_eq!(certs_ok(&dir, &["ca"]), [dir.join("ca.pem"), dir.join("ca-key.pem")]);
    let node = certs_ok(&dir, &["node", "--id", "3", "--host", "leaf-3.example.test", "--host", "127.0.0.1"]);
    assert_eq!(node, [dir.join("node-3.pem"), dir.join("node-3-key.pem")]);
    let client = certs_ok(&dir, &["client", "--name", "ops", "--days", "30"]);
    assert_eq!(client, [dir.join("client-ops.pem"), dir.join("client-ops-key.pem")]);

    assert_eq!(identity(&node[0]), Some(CertIdentity::Node(3)));
    assert_eq!(identity(&client[0]), Some(CertIdentity::Client("ops".into())));
    // Each pair loads as a rustls server identity (the key matches its certificate).
    for pair in [&node, &client] {
        let chain = vec![CertificateDer::from_pem_file(&pair[0]).unwrap()];
        let key = PrivateKeyDer::from_pem_file(&pair[1]).unwrap();
        rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap_or_else(|e| panic!("{pair:?}: {e}"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for key in [dir.join("ca-key.pem"), node[1].clone(), client[1].clone()] {
            assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600, "{key:?}");
        }
    }

    // A second run refuses to overwrite, naming the file; --force replaces.
    let before = std::fs::read(&node[0]).unwrap();
    let err = certs_refused(&dir, &["node", "--id", "3", "--host", "localhost"]);
    assert!(err.contains("node-3-key.pem already exists") && err.contains("--force"), "{err}");
    assert_eq!(std::fs::read(&node[0]).unwrap(), before);
    certs_ok(&dir, &["node", "--id", "3", "--host", "localhost", "--force"]);
    assert_ne!(std::fs::read(&node[0]).unwrap(), before);

    // Bad input.
    let err = certs_refused(&dir, &["client", "--name", "a b"]);
    assert!(err.contains("bad client name"), "{err}");
    let err = certs_refused(&dir, &["node", "--id", "4", "--host", "bad host"]);
    assert!(err.contains("bad host \"bad host\""), "{err}");
    let err = certs_refused(&dir, &["node", "--id", "4"]);
    assert!(err.contains("--host"), "{err}");
    let err = certs_refused(&dir, &["ca", "--days", "0", "--force"]);
    assert!(err.contains("--days must be 1 to 36500"), "{err}");
}

/// `leaf certs bundle ARGS`: (exit code, stdout lines, stderr).
fn bundle(args: &[&str]) -> (Option<i32>, Vec<String>, String) {
    let out = leaf(&[&["certs", "bundle"], args].concat());
    let stdout = String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect();
    (out.status.code(), stdout, String::from_utf8(out.stderr).unwrap())
}

#[test]
fn leaf_certs_bundle_makes_what_is_missing_and_keeps_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let (tls, ca) = (tmp.path().join("tls"), tmp.path().join("ca"));
    let (tls_s, ca_s) = (tls.to_str().unwrap(), ca.to_str().unwrap());
    let args = ["--dir", tls_s, "--ca-dir", ca_s, "--node", "1=leaf1,127.0.0.1,localhost", "--client", "ops"];
    let (code, first, err) = bundle(&args);
    assert_eq!(code, Some(0), "{err}");
    let line = |verb: &str, dir: &Path, name: &str| format!("{verb} {}", dir.join(name).display());
    let files = ["node-1.pem", "node-1-key.pem", "client-ops.pem", "client-ops-key.pem"];
    let mut expected =
        vec![line("wrote", &ca, "ca.pem"), line("wrote", &ca, "ca-key.pem"), line("wrote", &tls, "ca.pem")];
    expected.extend(files.iter().map(|f| line("wrote", &tls, f)));
    assert_eq!(first, expected);
    assert!(!tls.join("ca-key.pem").exists(), "the CA key is beside the node keys");
    assert_eq!(identity(&tls.join("node-1.pem")), Some(CertIdentity::Node(1)));

    // Again, with node 2 added: only node 2 is written.
    let before = std::fs::read(tls.join("node-1.pem")).unwrap();
    let (code, second, err) = bundle(&[&args[..], &["--node", "2=leaf2"]].concat());
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(second.iter().filter(|l| l.starts_with("wrote ")).count(), 2, "{second:?}");
    assert!(second.contains(&line("wrote", &tls, "node-2.pem")), "{second:?}");
    assert!(second.contains(&line("kept", &tls, "node-1.pem")), "{second:?}");
    assert_eq!(std::fs::read(tls.join("node-1.pem")).unwrap(), before);

    // A kept certificate that lacks a listed host: a warning, exit 0.
    let (code, _, err) = bundle(&["--dir", tls_s, "--ca-dir", ca_s, "--node", "1=leaf1,leaf1.example.test"]);
    assert_eq!(code, Some(0));
    assert!(err.contains("warning: kept") && err.contains("leaf1.example.test"), "{err}");

    // Bad input: exit 2, nothing written.
    let (code, out, err) = bundle(&["--dir", tls_s, "--node", "3=leaf3", "--node", "3=leaf3b"]);
    assert_eq!(code, Some(2));
    assert!(out.is_empty() && err.contains("node 3 is listed twice"), "{err}");
    let (code, _, err) = bundle(&["--dir", tls_s, "--node", "leaf3"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("ID=HOST"), "{err}");
    assert!(!tls.join("node-3.pem").exists());
}
