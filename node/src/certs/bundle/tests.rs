//! Tests of `leaf certs bundle`: a second run writes nothing and leaves every file as it was,
//! the CA is created once and reused (also when brought in), listed hosts land in the SANs,
//! the output directory never holds the CA key, bad input writes nothing, and a kept file
//! that does not fit is reported.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use leaf_api::identity::CertIdentity;
use x509_parser::extensions::GeneralName;

use super::super::tests::{cert, identity, listing, parse, verify_client, verify_server};
use super::*;
use crate::certs::{issue_node, MAX_DAYS};

fn node(spec: &str) -> NodeSpec {
    spec.parse().unwrap()
}

/// Runs a bundle of `nodes` and `clients` into `dir`, the CA in `ca_dir`.
fn run(dir: &Path, ca_dir: Option<&Path>, nodes: &[&str], clients: &[&str]) -> Result<Report, CertsError> {
    let nodes: Vec<NodeSpec> = nodes.iter().map(|s| node(s)).collect();
    let clients: Vec<String> = clients.iter().map(|s| s.to_string()).collect();
    let bundle = Bundle { dir, ca_dir, nodes: &nodes, clients: &clients, days: 30, ca_days: 60 };
    let mut report = Report::default();
    bundle.run(&mut report).map(|()| report)
}

/// Every file under `dirs` with its bytes.
fn contents(dirs: &[&Path]) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut all = BTreeMap::new();
    for dir in dirs {
        for name in listing(dir) {
            let path = dir.join(name);
            all.insert(path.clone(), std::fs::read(&path).unwrap());
        }
    }
    all
}

fn sorted(paths: Vec<&Path>) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = paths.into_iter().map(Path::to_path_buf).collect();
    v.sort();
    v
}

fn in_dir(dir: &Path, names: &[&str]) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = names.iter().map(|n| dir.join(n)).collect();
    v.sort();
    v
}

#[test]
fn a_second_run_writes_nothing_and_keeps_every_file_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, ca_dir) = (tmp.path().join("tls"), tmp.path().join("ca"));
    let nodes = ["1=leaf1,127.0.0.1,localhost", "2=leaf2,127.0.0.1,localhost"];

    let first = run(&dir, Some(&ca_dir), &nodes, &["ops"]).unwrap();
    assert!(first.warnings.is_empty(), "{:?}", first.warnings);
    assert!(first.paths(Action::Kept).is_empty());
    let mut wrote = sorted(first.paths(Action::Wrote));
    let tls_files = [
        "ca.pem",
        "client-ops-key.pem",
        "client-ops.pem",
        "node-1-key.pem",
        "node-1.pem",
        "node-2-key.pem",
        "node-2.pem",
    ];
    let mut expected = in_dir(&ca_dir, &["ca.pem", "ca-key.pem"]);
    expected.extend(in_dir(&dir, &tls_files));
    expected.sort();
    wrote.sort();
    assert_eq!(wrote, expected);
    // The nodes' directory holds the CA certificate but never its key.
    assert_eq!(listing(&dir), tls_files);
    assert_eq!(listing(&ca_dir), ["ca-key.pem", "ca.pem"]);
    assert_eq!(std::fs::read(dir.join("ca.pem")).unwrap(), std::fs::read(ca_dir.join("ca.pem")).unwrap());

    let before = contents(&[&dir, &ca_dir]);
    let second = run(&dir, Some(&ca_dir), &nodes, &["ops"]).unwrap();
    assert!(second.paths(Action::Wrote).is_empty(), "{:?}", second.files);
    assert_eq!(sorted(second.paths(Action::Kept)), expected);
    assert!(second.warnings.is_empty(), "{:?}", second.warnings);
    assert_eq!(contents(&[&dir, &ca_dir]), before, "a second run changed a file");
}

#[test]
fn the_ca_is_reused_and_signs_what_is_added_later() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, ca_dir) = (tmp.path().join("tls"), tmp.path().join("ca"));
    // A CA that exists before the first bundle is used, not replaced.
    create_ca(&ca_dir, 60, false).unwrap();
    let ca_files = contents(&[&ca_dir]);
    run(&dir, Some(&ca_dir), &["1=leaf1", "2=leaf2", "3=leaf3"], &[]).unwrap();
    assert_eq!(contents(&[&ca_dir]), ca_files);
    let three = contents(&[&dir]);

    // Nodes 4 and 5 and a client join the list: only their files are written.
    let all = ["1=leaf1", "2=leaf2", "3=leaf3", "4=leaf4", "5=leaf5"];
    let report = run(&dir, Some(&ca_dir), &all, &["ops"]).unwrap();
    let names =
        ["node-4.pem", "node-4-key.pem", "node-5.pem", "node-5-key.pem", "client-ops.pem", "client-ops-key.pem"];
    assert_eq!(sorted(report.paths(Action::Wrote)), in_dir(&dir, &names));
    assert_eq!(contents(&[&ca_dir]), ca_files);
    let now = contents(&[&dir]);
    for (path, bytes) in &three {
        assert_eq!(now.get(path), Some(bytes), "{path:?} changed");
    }
    // Every certificate verifies against both copies of the one CA.
    for id in 1..=5 {
        let path = dir.join(format!("node-{id}.pem"));
        for ca in [&dir, &ca_dir] {
            verify_server(ca, &path, &format!("leaf{id}")).unwrap_or_else(|e| panic!("node {id}: {e}"));
            verify_client(ca, &path).unwrap();
        }
    }
    verify_client(&ca_dir, &dir.join("client-ops.pem")).unwrap();
}

#[test]
fn listed_hosts_land_in_the_sans() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    run(dir, None, &["7=leaf7,leaf-7.example.test,127.0.0.1,[::1],localhost"], &["ops"]).unwrap();
    let der = cert(&dir.join("node-7.pem"));
    let x = parse(&der);
    assert_eq!(identity(&x), Some(CertIdentity::Node(7)));
    let names = &x.subject_alternative_name().unwrap().unwrap().value.general_names;
    for want in [
        GeneralName::DNSName("leaf7"),
        GeneralName::DNSName("leaf-7.example.test"),
        GeneralName::DNSName("localhost"),
        GeneralName::IPAddress(&[127, 0, 0, 1]),
        GeneralName::IPAddress(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
        GeneralName::URI("urn:leaf:node:7"),
    ] {
        assert!(names.contains(&want), "{want:?} not in {names:?}");
    }
    assert_eq!(names.len(), 6, "{names:?}");
    for name in ["leaf7", "127.0.0.1", "::1", "localhost"] {
        verify_server(dir, &dir.join("node-7.pem"), name).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    assert!(verify_server(dir, &dir.join("node-7.pem"), "leaf8").is_err());
    let client = cert(&dir.join("client-ops.pem"));
    assert_eq!(identity(&parse(&client)), Some(CertIdentity::Client("ops".into())));
    // One directory: the CA key is in it, and is kept on the next run.
    assert!(listing(dir).contains(&"ca-key.pem".to_string()));
    let before = contents(&[dir]);
    let again = run(dir, Some(&dir.join(".")), &["7=leaf7,leaf-7.example.test,127.0.0.1,[::1],localhost"], &["ops"]);
    assert!(again.unwrap().paths(Action::Wrote).is_empty());
    assert_eq!(contents(&[dir]), before);
}

#[test]
fn bad_input_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, ca_dir) = (tmp.path().join("tls"), tmp.path().join("ca"));
    let cases: [(&[&str], &[&str]); 5] = [
        (&["1=leaf1", "1=leaf1b"], &[]),
        (&["1=leaf1", "2=bad host"], &[]),
        (&["1=leaf1", "2=leaf2:8080"], &[]),
        (&["1=leaf1"], &["ops", "a b"]),
        (&["1=leaf1"], &["ops", "ops"]),
    ];
    for (nodes, clients) in cases {
        match run(&dir, Some(&ca_dir), nodes, clients) {
            Err(CertsError::Duplicate(_) | CertsError::BadHost { .. } | CertsError::BadName(_)) => {}
            other => panic!("{nodes:?} {clients:?}: {other:?}"),
        }
        assert!(!dir.exists() && !ca_dir.exists(), "{nodes:?} {clients:?} wrote something");
    }
    let nodes = vec![node("1=leaf1")];
    for (days, ca_days) in [(0, 60), (30, 0), (MAX_DAYS + 1, 60)] {
        let b = Bundle { dir: &dir, ca_dir: Some(&ca_dir), nodes: &nodes, clients: &[], days, ca_days };
        assert!(matches!(b.run(&mut Report::default()), Err(CertsError::BadDays(_))));
    }
    assert!(!dir.exists() && !ca_dir.exists());
    assert_eq!(
        run(&dir, Some(&ca_dir), &["1=leaf1", "1=leaf1b"], &[]).unwrap_err().to_string(),
        "node 1 is listed twice"
    );
}

#[test]
fn node_specs_parse() {
    assert_eq!(node("3=leaf3"), NodeSpec { id: 3, hosts: vec!["leaf3".into()] });
    assert_eq!(
        node("12=leaf12, 127.0.0.1,[::1]"),
        NodeSpec { id: 12, hosts: vec!["leaf12".into(), "127.0.0.1".into(), "[::1]".into()] }
    );
    for bad in ["", "leaf3", "0=leaf", "x=leaf", "3=", "3=a,,b", "3=a,", "-1=a"] {
        assert!(bad.parse::<NodeSpec>().is_err(), "{bad:?}");
    }
}

#[test]
fn a_kept_certificate_that_does_not_fit_is_kept_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    run(dir, None, &["1=leaf1,127.0.0.1"], &[]).unwrap();
    let before = contents(&[dir]);
    let report = run(dir, None, &["1=leaf1,127.0.0.1,leaf1.example.test,10.0.0.1"], &[]).unwrap();
    assert!(report.paths(Action::Wrote).is_empty());
    assert_eq!(contents(&[dir]), before);
    match &report.warnings[..] {
        [w] => {
            assert!(w.contains("node-1.pem") && w.contains("leaf1.example.test, 10.0.0.1"), "{w}");
            assert!(w.contains("node-1-key.pem") && w.contains("issued again"), "{w}");
            assert!(!w.contains("127.0.0.1") && !w.contains("did not issue"), "{w}");
        }
        other => panic!("{other:?}"),
    }
    // A certificate of another CA under a node's name.
    let other = tempfile::tempdir().unwrap();
    create_ca(other.path(), 60, false).unwrap();
    let foreign = issue_node(other.path(), 2, &["leaf2".into()], 30, false).unwrap();
    std::fs::copy(&foreign.cert, dir.join("node-2.pem")).unwrap();
    std::fs::copy(&foreign.key, dir.join("node-2-key.pem")).unwrap();
    let report = run(dir, None, &["1=leaf1,127.0.0.1", "2=leaf2"], &[]).unwrap();
    match &report.warnings[..] {
        [w] => assert!(w.contains("node-2.pem") && w.contains("the CA did not issue it"), "{w}"),
        other => panic!("{other:?}"),
    }
    // A file that is no certificate.
    std::fs::write(dir.join("node-2.pem"), "not a certificate").unwrap();
    let report = run(dir, None, &["2=leaf2"], &[]).unwrap();
    assert!(report.warnings.iter().any(|w| w.contains("no readable PEM certificate")), "{:?}", report.warnings);
}

#[test]
fn a_half_pair_or_a_copy_of_another_ca_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, ca_dir) = (tmp.path().join("tls"), tmp.path().join("ca"));
    run(&dir, Some(&ca_dir), &["1=leaf1"], &[]).unwrap();

    // A certificate without its key.
    std::fs::remove_file(dir.join("node-1-key.pem")).unwrap();
    match run(&dir, Some(&ca_dir), &["1=leaf1", "2=leaf2"], &[]) {
        Err(e @ CertsError::HalfPair { .. }) => {
            assert!(e.to_string().contains("node-1.pem exists without") && e.to_string().contains("node-1-key.pem"))
        }
        other => panic!("{other:?}"),
    }
    std::fs::remove_file(dir.join("node-1.pem")).unwrap();
    run(&dir, Some(&ca_dir), &["1=leaf1"], &[]).unwrap();

    // The nodes' ca.pem is another CA's: nothing is issued beside it.
    let other = tempfile::tempdir().unwrap();
    create_ca(other.path(), 60, false).unwrap();
    std::fs::copy(other.path().join("ca.pem"), dir.join("ca.pem")).unwrap();
    let before = contents(&[&dir, &ca_dir]);
    match run(&dir, Some(&ca_dir), &["1=leaf1", "2=leaf2"], &[]) {
        Err(e @ CertsError::CaMismatch { .. }) => assert!(e.to_string().contains("another CA"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(contents(&[&dir, &ca_dir]), before);

    // Old and new CA side by side (a CA rotation): kept, and the new CA signs.
    let mut both = std::fs::read(other.path().join("ca.pem")).unwrap();
    both.extend(std::fs::read(ca_dir.join("ca.pem")).unwrap());
    std::fs::write(dir.join("ca.pem"), &both).unwrap();
    let report = run(&dir, Some(&ca_dir), &["1=leaf1", "2=leaf2"], &[]).unwrap();
    assert_eq!(sorted(report.paths(Action::Wrote)), in_dir(&dir, &["node-2.pem", "node-2-key.pem"]));
    assert_eq!(std::fs::read(dir.join("ca.pem")).unwrap(), both);
    verify_server(&ca_dir, &dir.join("node-2.pem"), "leaf2").unwrap();

    // A CA key without its certificate.
    let lone = tmp.path().join("lone");
    std::fs::create_dir(&lone).unwrap();
    std::fs::copy(ca_dir.join("ca-key.pem"), lone.join("ca-key.pem")).unwrap();
    assert!(matches!(run(&dir, Some(&lone), &[], &[]), Err(CertsError::HalfPair { .. })));
    assert_eq!(listing(&lone), ["ca-key.pem"]);
}

#[test]
fn a_ca_brought_without_its_key_is_enough_until_something_is_to_be_issued() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    run(dir, None, &["1=leaf1"], &[]).unwrap();
    std::fs::remove_file(dir.join("ca-key.pem")).unwrap();
    let report = run(dir, None, &["1=leaf1"], &[]).unwrap();
    assert!(report.paths(Action::Wrote).is_empty());
    match run(dir, None, &["1=leaf1", "2=leaf2"], &[]) {
        Err(CertsError::NoCa { missing, .. }) => assert_eq!(missing, dir.join("ca-key.pem")),
        other => panic!("{other:?}"),
    }
    assert!(!dir.join("node-2.pem").exists());
}
