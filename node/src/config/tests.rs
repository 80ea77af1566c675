//! Tests of loading the whole configuration: the layers, secrets, and checks across sections.
use super::*;

fn no_env() -> &'static str {
    "LEAF_TEST_UNSET_PREFIX_"
}

#[test]
fn defaults_are_valid_and_documented_values() {
    let c = Config::load_with_env(None, &Overrides::default(), no_env()).unwrap();
    assert_eq!(c, Config::default());
    assert_eq!(c.http_addr.to_string(), "127.0.0.1:8080");
    assert_eq!(c.data_dir, PathBuf::from("./leaf-data"));
    assert_eq!(c.bootstrap_tags[0].tag, "leaf-segment-test");
}

#[test]
#[allow(clippy::result_large_err)] // figment::Jail's closure signature
fn file_then_env_then_flags() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leaf.toml");
    std::fs::write(
        &path,
        "node_id = 3\nhttp_addr = \"127.0.0.1:0\"\nbootstrap_tags = []\n[segment]\nmax_step = 5000\n",
    )
    .unwrap();
    figment::Jail::expect_with(|jail| {
        jail.set_env("LEAF_SEGMENT__WAIT_TIMEOUT_MS", "250");
        jail.set_env("LEAF_NODE_ID", "4");
        jail.set_env("LEAF_URL", "http://ignored");
        jail.set_env("LEAF_CLUSTER_SECRET", "0123456789abcdef");
        jail.set_env("LEAF_PEERS", "1=a:1,2=b:2");
        jail.set_env("LEAF_SNOWFLAKE__WORKER_IDS", "512-1023");
        jail.set_env("LEAF_AUTH__REQUIRE_TOKEN_FOR_IDS", "true");
        jail.set_env("LEAF_AUDIT__MAX_RECORDS", "100");
        jail.set_env("LEAF_RAFT__ON_STORAGE_FAILURE", "exit");
        let peers = "1=127.0.0.1:8081, 2=leaf2:8080,3=[::1]:8083".parse().unwrap();
        let over = Overrides { data_dir: Some("/tmp/x".into()), peers: Some(peers), ..Default::default() };
        let c = Config::load_with_env(Some(&path), &over, "LEAF_").unwrap();
        assert_eq!(c.node_id, 4);
        assert_eq!(c.segment.max_step, 5000);
        assert_eq!(c.segment.wait_timeout_ms, 250);
        assert_eq!(c.data_dir, PathBuf::from("/tmp/x"));
        assert!(c.bootstrap_tags.is_empty());
        assert_eq!(c.peers.0.len(), 3);
        assert_eq!(c.peers.0[&2], "leaf2:8080");
        assert_eq!(c.cluster_secret(), Some("0123456789abcdef"));
        assert_eq!(c.snowflake.worker_ids, WorkerIds { first: 512, last: 1023 });
        assert!(c.auth.require_token_for_ids);
        assert_eq!(c.audit.max_records, 100);
        assert_eq!(c.raft.on_storage_failure, OnStorageFailure::Exit);
        Ok(())
    });
}

#[test]
#[allow(clippy::result_large_err)] // figment::Jail's closure signature
fn an_unknown_storage_failure_policy_is_refused() {
    figment::Jail::expect_with(|jail| {
        jail.set_env("LEAF_RAFT__ON_STORAGE_FAILURE", "reboot");
        let e = Config::load_with_env(None, &Overrides::default(), "LEAF_").unwrap_err().to_string();
        assert!(e.contains("reboot") && e.contains("stay") && e.contains("exit"), "{e}");
        Ok(())
    });
}

#[test]
#[allow(clippy::result_large_err)] // figment::Jail's closure signature
fn tls_paths_name_the_node_from_the_environment() {
    figment::Jail::expect_with(|jail| {
        // One setting for every pod of a StatefulSet: the ID comes from the hostname.
        jail.set_env("LEAF_TLS__CERT", "/tls/node-{node_id}.pem");
        jail.set_env("LEAF_TLS__KEY", "/tls/node-{node_id}-key.pem");
        jail.set_env("LEAF_TLS__CA", "/tls/ca.pem");
        let over = Overrides { node_id: Some(3), ..Default::default() };
        let c = Config::load_with_env(None, &over, "LEAF_").unwrap();
        assert_eq!(c.tls.cert, Some(PathBuf::from("/tls/node-3.pem")));
        assert_eq!(c.tls.key, Some(PathBuf::from("/tls/node-3-key.pem")));
        assert_eq!(c.tls.ca, Some(PathBuf::from("/tls/ca.pem")));
        Ok(())
    });
}

#[test]
fn the_systemd_config_parses_and_exits_on_storage_failure() {
    // Secrets come from the unit's environment file, so only the parse is checked here.
    let c: Config = Figment::from(Serialized::defaults(Config::default()))
        .merge(Toml::string(include_str!("../../../deploy/systemd/leaf.toml")))
        .extract()
        .unwrap();
    assert_eq!(c.node_id, 1);
    assert_eq!(c.raft.on_storage_failure, OnStorageFailure::Exit);
    assert!(c.bootstrap_tags.is_empty());
}

#[test]
fn the_example_file_documents_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leaf.toml");
    std::fs::write(&path, include_str!("../../../deploy/leaf.example.toml")).unwrap();
    let c = Config::load_with_env(Some(&path), &Overrides::default(), no_env()).unwrap();
    assert_eq!(c, Config::default());
}

#[test]
fn typos_and_nonsense_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leaf.toml");
    std::fs::write(&path, "node_idd = 3\n").unwrap();
    assert!(matches!(Config::load_with_env(Some(&path), &Overrides::default(), no_env()), Err(ConfigError::Parse(_))));
    assert!(matches!(
        Config::load_with_env(Some(&dir.path().join("missing.toml")), &Overrides::default(), no_env()),
        Err(ConfigError::MissingFile(_))
    ));
    let mut c = Config { node_id: 0, admin_token: Some("short".into()), ..Config::default() };
    c.segment.max_step = 0;
    c.raft.election_timeout_max_ms = 10;
    c.bootstrap_tags.push(c.bootstrap_tags[0].clone());
    let Err(ConfigError::Invalid(errs)) = c.validate() else { panic!("accepted") };
    assert_eq!(errs.len(), 5, "{errs:?}");
}

#[test]
fn raft_timing_nonsense_is_rejected() {
    let invalid = |f: &dyn Fn(&mut Config)| {
        let mut c = Config::default();
        f(&mut c);
        matches!(c.validate(), Err(ConfigError::Invalid(_)))
    };
    assert!(!invalid(&|_| ()));
    // A lease of fewer than 3 heartbeats, a max not above the lease, a max that would overflow
    // the timers derived from it.
    assert!(invalid(&|c| c.raft.election_timeout_min_ms = 2 * c.raft.heartbeat_ms));
    assert!(invalid(&|c| c.raft.election_timeout_max_ms = c.raft.election_timeout_min_ms));
    assert!(invalid(&|c| c.raft.election_timeout_max_ms = u64::MAX));
}

#[test]
fn connection_and_access_nonsense_is_rejected() {
    let mut c = Config::default();
    c.http.max_connections_per_address = 0;
    c.http.reserved_peer_connections = 10_001;
    c.http.idle_timeout_ms = 99;
    c.auth.public_endpoints = vec![crate::config::PublicEndpoint::Db, crate::config::PublicEndpoint::Db];
    let Err(ConfigError::Invalid(errs)) = c.validate() else { panic!("accepted") };
    assert_eq!(errs.len(), 4, "{errs:?}");
    // An endpoint that is not a monitor endpoint is a parse error, naming the key.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leaf.toml");
    std::fs::write(&path, "[auth]\npublic_endpoints = [\"admin\"]\n").unwrap();
    let Err(ConfigError::Parse(e)) = Config::load_with_env(Some(&path), &Overrides::default(), no_env()) else {
        panic!("accepted")
    };
    assert!(e.to_string().contains("public_endpoints"), "{e}");
}

#[test]
fn snowflake_and_fault_nonsense_is_rejected() {
    let mut c = Config::default();
    c.snowflake.epoch_ms = -1;
    c.snowflake.sequence_random_start = 4096;
    c.snowflake.time_window_ms = 10;
    c.snowflake.max_backward_ms = 5000;
    c.snowflake.max_startup_wait_ms = 1_000_000;
    c.snowflake.lease_ttl_ms = 500;
    c.snowflake.max_peer_offset_ms = 0;
    c.fault.clock_offset_ms = 10;
    let Err(ConfigError::Invalid(errs)) = c.validate() else { panic!("accepted") };
    assert_eq!(errs.len(), 8, "{errs:?}");
    let mut c = Config::default();
    c.snowflake.epoch_ms = i64::MAX;
    c.snowflake.lease_ttl_ms = 5000;
    c.fault.enabled = true;
    c.fault.clock_offset_ms = -i64::MAX;
    let Err(ConfigError::Invalid(errs)) = c.validate() else { panic!("accepted") };
    assert_eq!(errs.len(), 3, "{errs:?}");
    let mut c = Config::default();
    c.fault.enabled = true;
    c.fault.clock_offset_ms = 5000;
    c.validate().unwrap();
}

#[test]
fn peers_syntax_and_the_secret_they_need() {
    for bad in ["1", "x=a:1", "0=a:1", "1=a", "1=a:0", "1=a:1,1=b:2", "1=:80", "1=a b:80", "1=::1:80", "1=a:b:80"] {
        assert!(bad.parse::<Peers>().is_err(), "{bad:?} accepted");
    }
    let p: Peers = "2=b:2,1=a:1".parse().unwrap();
    assert_eq!(String::from(p.clone()), "1=a:1,2=b:2");
    let c = Config { peers: p, ..Config::default() };
    let Err(ConfigError::Invalid(errs)) = c.validate() else { panic!("accepted without a secret") };
    assert!(errs[0].contains("cluster_secret"), "{errs:?}");
    let c = Config { cluster_secret: Some("0123456789abcdef".into()), ..c };
    c.validate().unwrap();
    let c = Config { advertise_addr: Some("nohost".into()), ..c };
    assert!(c.validate().is_err());
}

#[test]
fn the_rewrite_bound_is_from_1_to_1048576_mib() {
    for (mib, ok) in [(0, false), (1, true), (64, true), (1_048_576, true), (1_048_577, false), (u64::MAX, false)] {
        let mut c = Config::default();
        c.raft.rewrite_above_mib = mib;
        match c.validate() {
            Ok(_) => assert!(ok, "{mib} MiB accepted"),
            Err(ConfigError::Invalid(errs)) => {
                assert!(!ok && errs.iter().any(|e| e.contains("raft.rewrite_above_mib")), "{mib}: {errs:?}")
            }
            Err(e) => panic!("{mib}: {e}"),
        }
    }
    // The largest bound in bytes fits: no overflow into a small one.
    let c = crate::config::RaftConfig { rewrite_above_mib: 1_048_576, ..Default::default() };
    assert_eq!(c.store_options().compact_above, 1 << 40);
}

#[test]
fn source_ip_must_be_a_unicast_address() {
    for bad in ["0.0.0.0", "::", "224.0.0.1", "255.255.255.255", "ff02::1"] {
        let mut c = Config::default();
        c.raft.source_ip = Some(bad.parse().unwrap());
        let Err(ConfigError::Invalid(errs)) = c.validate() else { panic!("{bad} accepted") };
        assert!(errs.iter().any(|e| e.contains("raft.source_ip")), "{errs:?}");
    }
    let mut c = Config::default();
    c.raft.source_ip = Some("127.0.0.12".parse().unwrap());
    c.validate().unwrap();
}

#[test]
#[allow(clippy::result_large_err)] // figment::Jail's closure signature
fn secrets_from_env_are_exact_strings_and_never_shown() {
    figment::Jail::expect_with(|jail| {
        // All digits, with a leading zero: parsed as a number it would lose the zero, and the
        // old error printed it.
        jail.set_env("LEAF_ADMIN_TOKEN", "01234567890123456789");
        jail.set_env("LEAF_CLUSTER_SECRET", "98765432109876543210");
        let c = Config::load_with_env(None, &Overrides::default(), "LEAF_").unwrap();
        assert_eq!(c.admin_token(), Some("01234567890123456789"));
        assert_eq!(c.cluster_secret(), Some("98765432109876543210"));
        let debug = format!("{c:?}");
        assert!(!debug.contains("0123456789") && !debug.contains("9876543210"), "{debug}");
        // Too short: refused without echoing the value.
        jail.set_env("LEAF_ADMIN_TOKEN", "12345678");
        jail.set_env("LEAF_CLUSTER_SECRET", "87654321");
        let e = Config::load_with_env(None, &Overrides::default(), "LEAF_").unwrap_err().to_string();
        assert!(e.contains("admin_token") && e.contains("cluster_secret"), "{e}");
        assert!(!e.contains("12345678") && !e.contains("87654321"), "{e}");
        Ok(())
    });
    // A secret of the wrong type in the file: the error names the key, not the value.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leaf.toml");
    std::fs::write(&path, "admin_token = 1234567890123456789\n").unwrap();
    let e = Config::load_with_env(Some(&path), &Overrides::default(), no_env()).unwrap_err().to_string();
    assert!(e.contains("admin_token"), "{e}");
    assert!(!e.contains("1234567890"), "{e}");
    // Not even TOML: the error quotes no source line.
    std::fs::write(&path, "node_id = 1\ncluster_secret = [9876543210987654321]\n").unwrap();
    let e = Config::load_with_env(Some(&path), &Overrides::default(), no_env()).unwrap_err().to_string();
    assert!(e.contains("line 2"), "{e}");
    assert!(!e.contains("9876543210"), "{e}");
}

#[test]
fn a_routable_plaintext_peer_listener_needs_the_insecure_flag() {
    let token = Some("0123456789abcdef".into());
    let secret = Some("fedcba9876543210".into());
    for addr in ["0.0.0.0:8080", "10.1.2.3:8080", "[::]:8080"] {
        let c = Config { http_addr: addr.parse().unwrap(), admin_token: token.clone(), ..Config::default() };
        c.validate().expect("no cluster secret: no peer traffic, nothing to refuse");
        let c = Config { cluster_secret: secret.clone(), ..c };
        let Err(ConfigError::Invalid(errs)) = c.validate() else { panic!("{addr}: plaintext peers accepted") };
        assert!(errs.iter().any(|e| e.contains("--insecure-plaintext-peers")), "{addr}: {errs:?}");
        Config { insecure_plaintext_peers: true, ..c.clone() }.validate().unwrap();
        let tls = TlsConfig {
            cert: Some("n.pem".into()),
            key: Some("n-key.pem".into()),
            ca: Some("ca.pem".into()),
            ..TlsConfig::default()
        };
        Config { tls, ..c }.validate().unwrap();
    }
    let local = Config { cluster_secret: secret, peers: "1=127.0.0.1:1".parse().unwrap(), ..Config::default() };
    local.validate().expect("loopback clusters (tests, local-cluster.sh) may stay plaintext");
}

#[test]
fn a_non_loopback_listener_needs_an_admin_token() {
    for addr in ["0.0.0.0:8080", "10.1.2.3:8080", "[::]:8080", "[2001:db8::1]:8080"] {
        let c = Config { http_addr: addr.parse().unwrap(), ..Config::default() };
        let Err(ConfigError::Invalid(errs)) = c.validate() else { panic!("{addr} accepted without a token") };
        assert!(errs.iter().any(|e| e.contains("admin_token is required")), "{addr}: {errs:?}");
        let c = Config { admin_token: Some("0123456789abcdef".into()), ..c };
        assert!(c.validate().is_ok(), "{addr}");
    }
    for addr in ["127.0.0.1:8080", "127.0.0.2:0", "[::1]:8080", "[::ffff:127.0.0.1]:8080"] {
        let c = Config { http_addr: addr.parse().unwrap(), ..Config::default() };
        assert!(c.validate().is_ok(), "{addr}");
    }
    assert!(is_loopback("::ffff:127.0.0.1".parse().unwrap()));
    assert!(!is_loopback("::ffff:10.0.0.1".parse().unwrap()));
    assert!(!is_loopback("::".parse().unwrap()));
}

/// Variables of the command-line client, test harnesses and tools: never configuration.
const UNRELATED: &[&str] = &[
    "LEAF_URL",
    "LEAF_CA",
    "LEAF_TOKEN",
    "LEAF_CLIENT_CERT",
    "LEAF_CLIENT_KEY",
    "LEAF_IMPORT_MYSQL_URL",
    "LEAF_FAILPOINTS",
    "LEAF_FAILPOINTS_FILE",
    "LEAF_BIN",
    "LEAF_BLESS",
];

/// Every environment variable the CLI (`clap`) reads, in every subcommand.
fn cli_env_vars() -> Vec<String> {
    fn walk(cmd: &clap::Command, out: &mut Vec<String>) {
        out.extend(cmd.get_arguments().filter_map(|a| a.get_env()).map(|e| e.to_string_lossy().into_owned()));
        cmd.get_subcommands().for_each(|sub| walk(sub, out));
    }
    let mut out = Vec::new();
    walk(&<crate::cli::Cli as clap::CommandFactory>::command(), &mut out);
    out
}

#[test]
#[allow(clippy::result_large_err)] // figment::Jail's closure signature
fn every_serialized_key_is_read_from_the_environment_and_nothing_else() {
    // The keys as serde writes the defaults, independently of the schema the loader uses: a
    // field added to `Config` or a section shows up here, and must be read from `LEAF_*`.
    let defaults = serde_json::to_value(Config::default()).unwrap();
    let mut wanted = std::collections::BTreeSet::new();
    for (key, value) in defaults.as_object().unwrap() {
        if SECRET_KEYS.contains(&key.as_str()) {
            continue; // read as raw strings, outside figment (see the secrets test)
        }
        wanted.insert(key.clone());
        for field in value.as_object().into_iter().flat_map(|section| section.keys()) {
            wanted.insert(format!("{key}.{field}"));
        }
    }
    assert!(wanted.contains("insecure_plaintext_peers") && wanted.contains("raft.on_storage_failure"));
    let cli = cli_env_vars();
    assert!(cli.iter().any(|v| v == "LEAF_URL"), "{cli:?}");
    figment::Jail::expect_with(|jail| {
        for key in &wanted {
            jail.set_env(format!("LEAF_{}", key.replace('.', "__").to_uppercase()), "1");
        }
        for var in UNRELATED.iter().copied().chain(cli.iter().map(String::as_str)) {
            jail.set_env(var, "x");
        }
        let read: std::collections::BTreeSet<String> =
            env_provider("LEAF_").iter().map(|(key, _)| key.to_string()).collect();
        assert_eq!(read, wanted);
        Ok(())
    });
}

#[test]
#[allow(clippy::result_large_err)] // figment::Jail's closure signature
fn the_cli_variables_do_not_disturb_the_server() {
    figment::Jail::expect_with(|jail| {
        for var in UNRELATED.iter().copied().chain(cli_env_vars().iter().map(String::as_str)) {
            // The admin token is both the CLI's and the server's, by design.
            if var != "LEAF_ADMIN_TOKEN" {
                jail.set_env(var, "http://127.0.0.1:1");
            }
        }
        assert_eq!(Config::load_with_env(None, &Overrides::default(), "LEAF_").unwrap(), Config::default());
        Ok(())
    });
}

#[test]
fn the_secret_keys_are_the_fields_of_type_secret() {
    let schema = schema();
    let properties = schema["properties"].as_object().unwrap();
    let mut found: Vec<&str> =
        properties.iter().filter(|(_, s)| s["writeOnly"] == true).map(|(k, _)| k.as_str()).collect();
    found.sort_unstable();
    assert_eq!(found, SECRET_KEYS, "a field of type Secret is missing from SECRET_KEYS, or the reverse");
}

#[test]
fn quota_and_watch_nonsense_is_rejected() {
    let invalid = |c: Config| match c.validate() {
        Err(ConfigError::Invalid(errs)) => errs.join("; "),
        other => panic!("accepted: {other:?}"),
    };
    let mut c = Config::default();
    c.auth.anonymous_burst_ids = 999_999;
    assert!(invalid(c).contains("auth.anonymous_burst_ids"));
    let mut c = Config::default();
    c.auth.anonymous_ids_per_sec = 1_000_000_001;
    assert!(invalid(c).contains("auth.anonymous_ids_per_sec"));
    for watches in [0, 100_001] {
        let mut c = Config::default();
        c.grpc.max_health_watches = watches;
        assert!(invalid(c).contains("grpc.max_health_watches"));
    }
    // Off, the burst does not matter.
    let mut c = Config::default();
    (c.auth.anonymous_ids_per_sec, c.auth.anonymous_burst_ids) = (0, 0);
    c.validate().unwrap();
}
