//! Tag templates: only the admin manages them; a tag matching one is made on its first ID
//! request by the admin or a token with the `tags` right on it (within its `max_tags`), and by
//! nobody else; concurrent first requests make it once; an archived tag is not made again;
//! templates survive a restart.
use hyper::StatusCode;
use leaf_api::audit::{Actor, AuditAction, AuditFilter};
use leaf_api::profile::Profile;
use leaf_api::template::PutTemplateRequest;
use leaf_api::tokens::{CreateTokenRequest, Right, TagPattern};
use leaf_api::ErrorCode;
use leaf_client::{Client, ClientError};
use tempfile::TempDir;

use crate::support::{client, config, start, TOKEN};

fn refused<T: std::fmt::Debug>(r: Result<T, ClientError>) -> (Option<StatusCode>, Option<ErrorCode>, String) {
    let e = r.expect_err("refused");
    (e.status(), e.code(), e.to_string())
}

fn invoices() -> PutTemplateRequest {
    PutTemplateRequest {
        pattern: "tenant-*-invoice".into(),
        step: 50,
        max_id: Some(1_000),
        description: Some("a tenant's invoice numbers".into()),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_makes_a_tag_on_its_first_id_request_for_callers_allowed_to_create_it() {
    let dir = TempDir::new().unwrap();
    let cfg = leaf_node::Config { admin_token: Some(TOKEN.into()), ..config(&dir) };
    let (node, admin) = start(cfg.clone()).await;
    let url = format!("http://{}", node.http_addr());
    let token = |name: &str, rights: Vec<Right>, pattern: &str, max_tags: Option<u32>| CreateTokenRequest {
        name: name.into(),
        rights,
        tags: vec![TagPattern::parse(pattern).unwrap()],
        max_tags,
        ..Default::default()
    };
    let tenant = admin.create_token(&token("tenant-7", vec![Right::Ids, Right::Tags], "tenant-7-*", Some(1))).await;
    let tenant = client(&url, Some(tenant.unwrap().bearer));
    let reader = admin.create_token(&token("reader", vec![Right::Ids], "*", None)).await.unwrap();
    let reader = client(&url, Some(reader.bearer));
    let manager = admin.create_token(&token("manager", vec![Right::Tags, Right::Cluster], "*", None)).await;
    let manager = client(&url, Some(manager.unwrap().bearer));
    let anonymous = client(&url, None);

    // Managing templates is the admin's: a token with every tag right is refused.
    let (status, code, _) = refused(manager.put_template("invoices", &invoices()).await);
    assert_eq!((status, code), (Some(StatusCode::FORBIDDEN), Some(ErrorCode::Forbidden)));
    assert_eq!(refused(manager.templates().await).1, Some(ErrorCode::Forbidden));
    let put = admin.put_template("invoices", &invoices()).await.unwrap();
    assert_eq!((put.pattern.as_str(), put.step, put.max_id), ("tenant-*-invoice", 50, Some(1_000)));
    // Bad names, patterns and settings, and a pattern that may make the same tags: refused.
    let bad = [
        ("bad name", invoices()),
        ("two-stars", PutTemplateRequest { pattern: "a*b*".into(), ..invoices() }),
        ("no-star", PutTemplateRequest { pattern: "tenant".into(), ..invoices() }),
        ("zero-step", PutTemplateRequest { step: 0, ..invoices() }),
        // A daily tag takes no max_id: checked as its creation would be.
        ("daily-start", PutTemplateRequest { pattern: "day-*".into(), profile: Some(Profile::Daily), ..invoices() }),
    ];
    for (name, body) in bad {
        let (status, code, e) = refused(admin.put_template(name, &body).await);
        assert_eq!((status, code), (Some(StatusCode::BAD_REQUEST), Some(ErrorCode::InvalidRequest)), "{name}: {e}");
    }
    // A bound below its tags' first ID: they would have no ID to hand out (409, as exhausted).
    let low = PutTemplateRequest { upper_bound: Some(10), ..invoices() };
    let (status, code, e) = refused(admin.put_template("low-bound", &low).await);
    assert_eq!((status, code), (Some(StatusCode::CONFLICT), Some(ErrorCode::TagExhausted)), "{e}");
    let wide = PutTemplateRequest { pattern: "tenant-*".into(), ..invoices() };
    let (status, code, e) = refused(admin.put_template("wide", &wide).await);
    assert_eq!((status, code), (Some(StatusCode::CONFLICT), Some(ErrorCode::TemplateConflict)), "{e}");
    assert_eq!(admin.templates().await.unwrap().templates.len(), 1);

    // The tenant's first ID request makes its tag with the template's settings.
    assert_eq!(tenant.segment_id("tenant-7-invoice").await.unwrap(), 1_000);
    assert_eq!(tenant.segment_ids("tenant-7-invoice", 3).await.unwrap(), [1_001, 1_002, 1_003]);
    let made = admin.tag("tenant-7-invoice").await.unwrap();
    assert_eq!((made.step, made.description.as_str()), (50, "a tenant's invoice numbers"));
    let page =
        admin.audit(&AuditFilter { tag: Some("tenant-7-invoice".into()), ..Default::default() }, None, None).await;
    let record = page.unwrap().records.pop().expect("the creation is on record");
    assert!(matches!(record.actor, Actor::Token { ref name, .. } if name == "tenant-7"), "{record:?}");
    assert!(matches!(record.action, AuditAction::TagCreated { step: 50, first_id: 1_000, .. }), "{record:?}");
    // Its max_tags of one is spent: its next template tag is refused, and not made.
    let (status, code, e) = refused(tenant.segment_id("tenant-7-x-invoice").await);
    assert_eq!((status, code), (Some(StatusCode::FORBIDDEN), Some(ErrorCode::Forbidden)), "{e}");
    assert!(e.contains("max_tags"), "{e}");
    // A tag no template makes stays unknown.
    assert_eq!(refused(tenant.segment_id("tenant-7-order").await).1, Some(ErrorCode::TagNotFound));
    // Without the tags right, or without a token, nothing is made.
    let (status, code, e) = refused(reader.segment_id("tenant-8-invoice").await);
    assert_eq!((status, code), (Some(StatusCode::FORBIDDEN), Some(ErrorCode::Forbidden)), "{e}");
    assert!(
        e.contains("'tags' right") && !e.contains("invoices"),
        "names the right, not the template it may not see: {e}"
    );
    assert_eq!(refused(anonymous.segment_id("tenant-9-invoice").await).1, Some(ErrorCode::TagNotFound));
    for tag in ["tenant-7-x-invoice", "tenant-8-invoice", "tenant-9-invoice", "tenant-7-order"] {
        assert_eq!(refused(admin.tag(tag).await).1, Some(ErrorCode::TagNotFound), "{tag} was made");
    }

    // Concurrent first requests (the admin's) make the tag once; every ID is unique.
    let takes = (0..8).map(|_| {
        let admin = admin.clone();
        tokio::spawn(async move { admin.segment_ids("tenant-10-invoice", 5).await.unwrap() })
    });
    let mut ids: Vec<i64> = futures::future::join_all(takes).await.into_iter().flat_map(|r| r.unwrap()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 40, "duplicates among the first IDs");
    assert!(ids[0] >= 1_000);
    // An archived tag is not made again: its name never hands out an ID again.
    admin.archive_tag("tenant-10-invoice").await.unwrap();
    assert_eq!(refused(admin.segment_id("tenant-10-invoice").await).1, Some(ErrorCode::TagNotFound));

    // The template outlives a restart; once deleted it makes nothing more.
    node.shutdown().await;
    let (node, admin) = start(cfg).await;
    let listed = admin.templates().await.unwrap().templates;
    assert_eq!(listed.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["invoices"]);
    assert_eq!(admin.segment_id("tenant-11-invoice").await.unwrap(), 1_000);
    admin.delete_template("invoices").await.unwrap();
    let (status, code, _) = refused(admin.delete_template("invoices").await);
    assert_eq!((status, code), (Some(StatusCode::NOT_FOUND), Some(ErrorCode::TemplateNotFound)));
    assert_eq!(refused(admin.segment_id("tenant-12-invoice").await).1, Some(ErrorCode::TagNotFound));
    assert_eq!(admin.segment_id("tenant-11-invoice").await.unwrap(), 1_001, "the tags it made stay");
    node.shutdown().await;
}

/// The same rule over gRPC: the ID calls share the core's path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_id_call_makes_a_tag_from_its_template_too() {
    use leaf_api::grpc::v1::id_service_client::IdServiceClient;
    use leaf_api::grpc::v1::GetSegmentIdsRequest;
    let dir = TempDir::new().unwrap();
    let cfg = leaf_node::Config { admin_token: Some(TOKEN.into()), ..config(&dir) };
    let (node, admin): (_, Client) = start(cfg).await;
    admin.put_template("invoices", &invoices()).await.unwrap();
    let url = format!("http://{}", node.http_addr());
    let ch = leaf_loadgen::grpc::channel(&url, None).await.unwrap();
    let mut ids = IdServiceClient::new(ch);
    let ask = |tag: &str, bearer: Option<&str>| {
        let mut r = tonic::Request::new(GetSegmentIdsRequest { tag: tag.into(), count: 2 });
        if let Some(b) = bearer {
            r.metadata_mut().insert("authorization", format!("Bearer {b}").parse().unwrap());
        }
        r
    };
    // Other profiles: a daily template with its default options (no max_id) makes daily tags.
    let daily =
        PutTemplateRequest { pattern: "day-*".into(), profile: Some(Profile::Daily), max_id: None, ..invoices() };
    assert_eq!(admin.put_template("days", &daily).await.unwrap().max_id, None);
    let id = admin.segment_id("day-eu").await.unwrap();
    assert!(id > 20_000_101 * 100_000_000, "yyyyMMdd and an 8-digit counter: {id}");
    assert_eq!(admin.tag("day-eu").await.unwrap().profile, Profile::Daily);
    let e = ids.get_segment_ids(ask("tenant-3-invoice", None)).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound, "no token, no tag: {e:?}");
    let got: leaf_api::ranges::IdRanges =
        ids.get_segment_ids(ask("tenant-3-invoice", Some(TOKEN))).await.unwrap().into_inner().into();
    assert_eq!(got.ids().collect::<Vec<i64>>(), [1_000, 1_001]);
    node.shutdown().await;
}

/// Templates over gRPC's AdminService: the same operations and rules as `/admin/templates*`
/// (the admin only; a bad pattern, an overlap and a missing template answered with their
/// codes), on the same state as HTTP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_admin_service_manages_templates_for_the_admin_only() {
    use leaf_api::grpc::v1::admin_service_client::AdminServiceClient;
    use leaf_api::grpc::v1::{self, DeleteTemplateRequest, ListTemplatesRequest};
    use leaf_api::tokens::{CreateTokenRequest, Right, TagPattern};
    use tonic::Code;
    let dir = TempDir::new().unwrap();
    let cfg = leaf_node::Config { admin_token: Some(TOKEN.into()), ..config(&dir) };
    let (node, admin): (_, Client) = start(cfg).await;
    let manager = CreateTokenRequest {
        name: "manager".into(),
        rights: vec![Right::Tags, Right::Ids],
        tags: vec![TagPattern::parse("*").unwrap()],
        ..Default::default()
    };
    let manager = admin.create_token(&manager).await.unwrap().bearer;
    let url = format!("http://{}", node.http_addr());
    let mut grpc = AdminServiceClient::new(leaf_loadgen::grpc::channel(&url, None).await.unwrap());
    fn by<T>(bearer: Option<&str>, r: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(r);
        if let Some(b) = bearer {
            r.metadata_mut().insert("authorization", format!("Bearer {b}").parse().unwrap());
        }
        r
    }
    let leaf_code = |s: &tonic::Status| s.metadata().get("leaf-code").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let put = |name: &str, pattern: &str| v1::PutTemplateRequest {
        name: name.into(),
        pattern: pattern.into(),
        step: 50,
        max_id: Some(1_000),
        description: "a tenant's invoice numbers".into(),
        profile: v1::Profile::Segment.into(),
        ..Default::default()
    };

    let e = grpc.put_template(by(None, put("invoices", "tenant-*-invoice"))).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    let e = grpc.put_template(by(Some(&manager), put("invoices", "tenant-*-invoice"))).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "a token with every tag right is not the admin: {e:?}");
    assert_eq!(
        grpc.list_templates(by(Some(&manager), ListTemplatesRequest {})).await.unwrap_err().code(),
        Code::PermissionDenied
    );

    let t = grpc.put_template(by(Some(TOKEN), put("invoices", "tenant-*-invoice"))).await.unwrap().into_inner();
    assert_eq!(
        (t.name.as_str(), t.pattern.as_str(), t.step, t.max_id),
        ("invoices", "tenant-*-invoice", 50, Some(1_000))
    );
    assert!(t.created_ms > 0 && t.updated_ms == t.created_ms, "{t:?}");
    // HTTP sees what gRPC put.
    assert_eq!(admin.templates().await.unwrap().templates[0].pattern.as_str(), "tenant-*-invoice");

    let e = grpc.put_template(by(Some(TOKEN), put("orders", "tenant-*"))).await.unwrap_err();
    assert_eq!((e.code(), leaf_code(&e).as_deref()), (Code::FailedPrecondition, Some("template_conflict")), "{e:?}");
    let e = grpc.put_template(by(Some(TOKEN), put("bad", "a*b*c"))).await.unwrap_err();
    assert_eq!((e.code(), leaf_code(&e).as_deref()), (Code::InvalidArgument, Some("invalid_request")), "{e:?}");
    let e = grpc.put_template(by(Some(TOKEN), v1::PutTemplateRequest { profile: 9, ..put("bad", "x-*") })).await;
    assert_eq!(e.unwrap_err().code(), Code::InvalidArgument);
    let e = grpc.put_template(by(Some(TOKEN), v1::PutTemplateRequest { step: 0, ..put("bad", "x-*") })).await;
    assert_eq!(e.unwrap_err().code(), Code::InvalidArgument);
    let daily = v1::PutTemplateRequest {
        max_id: None,
        profile: v1::Profile::Daily.into(),
        daily: Some(v1::DailyOptions { digits: 4, utc_offset: "+08:00".into() }),
        ..put("days", "day-*")
    };
    let d = grpc.put_template(by(Some(TOKEN), daily)).await.unwrap().into_inner();
    assert_eq!((d.profile, d.daily.as_ref().map(|o| o.digits)), (v1::Profile::Daily.into(), Some(4)));
    let list = grpc.list_templates(by(Some(TOKEN), ListTemplatesRequest {})).await.unwrap().into_inner();
    let names: Vec<&str> = list.templates.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["days", "invoices"]);

    // A tag made from it, then the template deleted: the tag stays, no new one is made.
    assert_eq!(admin.segment_id("tenant-1-invoice").await.unwrap(), 1_000);
    let gone = grpc.delete_template(by(Some(TOKEN), DeleteTemplateRequest { name: "invoices".into() })).await;
    assert_eq!(gone.unwrap().into_inner().pattern, "tenant-*-invoice");
    let e = grpc.delete_template(by(Some(TOKEN), DeleteTemplateRequest { name: "invoices".into() })).await.unwrap_err();
    assert_eq!((e.code(), leaf_code(&e).as_deref()), (Code::NotFound, Some("template_not_found")), "{e:?}");
    assert_eq!(refused(admin.segment_id("tenant-2-invoice").await).1, Some(ErrorCode::TagNotFound));
    assert_eq!(admin.segment_id("tenant-1-invoice").await.unwrap(), 1_001);
    node.shutdown().await;
}
