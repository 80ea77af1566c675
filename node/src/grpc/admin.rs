//! `leaf.v1.AdminService`: tags with their profiles, and tag templates, over gRPC, on the same
//! functions as `/admin/tags*` and `/admin/templates*`, with the same credentials: the connection's
//! [`ConnInfo`] (put in each gRPC request's extensions by the listener) and the
//! `authorization` metadata go through the same check as the HTTP auth layer's.
use std::sync::Arc;

use leaf_api::grpc::v1::admin_service_server::AdminService;
use leaf_api::grpc::v1::{
    self, CreateTagRequest, CreateTagsRequest, CreateTagsResponse, DeleteTemplateRequest, GetTagRequest,
    ListTemplatesRequest, Profile, PutTemplateRequest, Tag, Template, TemplateList,
};
use leaf_api::profile::DailyOptions;
use leaf_api::types::CreateTagRequest as HttpCreate;
use leaf_api::ErrorCode;
use tonic::{Request, Response, Status};

use crate::access::credentials::ConnInfo;
use crate::metrics::GrpcMethod;
use crate::service::auth::Credentials;
use crate::service::{ApiError, App};

use super::ids::Ids;

/// The admin service over the node's [`App`].
#[derive(Clone)]
pub struct Admin {
    pub app: Arc<App>,
}

impl Admin {
    /// The caller's admin credentials, as `/admin/*` checks them.
    fn authorize<T>(&self, req: &Request<T>) -> Result<crate::access::Principal, ApiError> {
        let Some(conn) = req.extensions().get::<ConnInfo>() else {
            // Every call through the listener carries it: refuse rather than guess.
            return Err(ApiError::new(ErrorCode::Forbidden, "the caller's connection is unknown"));
        };
        // Present but not text is a credential sent, and checked (refused), not one absent.
        let authorization = req.metadata().get("authorization").map(|v| v.to_str().unwrap_or(""));
        self.app.authorize_admin(conn, Credentials { authorization, ..Credentials::default() })
    }
}

/// A profile and daily options off the wire (their values are checked with the rest of the
/// settings by the operation).
fn settings(profile: i32, daily: Option<v1::DailyOptions>) -> Result<(Profile, Option<DailyOptions>), ApiError> {
    let bad = |m: String| ApiError::new(ErrorCode::InvalidRequest, m);
    let profile = Profile::try_from(profile).map_err(|_| bad(format!("unknown profile {profile}")))?;
    let daily = match daily {
        None => None,
        Some(d) => Some(DailyOptions {
            digits: match d.digits {
                0 => None,
                n => Some(u8::try_from(n).map_err(|_| bad(format!("daily digits must be from 1 to 10, got {n}")))?),
            },
            utc_offset: (!d.utc_offset.is_empty()).then_some(d.utc_offset),
        }),
    };
    Ok((profile, daily))
}

/// The HTTP API's request for a gRPC one (the same checks follow in [`App::create_tag`]).
fn http_request(r: CreateTagRequest) -> Result<HttpCreate, ApiError> {
    let (profile, daily) = settings(r.profile, r.daily)?;
    Ok(HttpCreate {
        tag: r.tag,
        step: r.step,
        max_id: r.max_id,
        description: (!r.description.is_empty()).then_some(r.description),
        profile: Some(profile.into()),
        daily,
        gapless: None,
        upper_bound: r.upper_bound,
    })
}

/// The name and the HTTP API's body of a template's put (checked by [`App::put_template`]).
fn http_template(r: PutTemplateRequest) -> Result<(String, leaf_api::template::PutTemplateRequest), ApiError> {
    let (profile, daily) = settings(r.profile, r.daily)?;
    let body = leaf_api::template::PutTemplateRequest {
        pattern: r.pattern,
        step: r.step,
        max_id: r.max_id,
        description: (!r.description.is_empty()).then_some(r.description),
        profile: Some(profile.into()),
        daily,
        upper_bound: r.upper_bound,
    };
    Ok((r.name, body))
}

#[tonic::async_trait]
impl AdminService for Admin {
    async fn create_tag(&self, req: Request<CreateTagRequest>) -> Result<Response<Tag>, Status> {
        let r = async {
            let who = self.authorize(&req)?;
            who.require(leaf_api::tokens::Right::Tags)?;
            let body = http_request(req.into_inner())?;
            self.app.create_tag(body, &who).await
        }
        .await;
        Ids::answer(&self.app, GrpcMethod::CreateTag, r.map(Tag::from))
    }

    async fn create_tags(&self, req: Request<CreateTagsRequest>) -> Result<Response<CreateTagsResponse>, Status> {
        let r = async {
            let who = self.authorize(&req)?;
            who.require(leaf_api::tokens::Right::Tags)?;
            let tags = req.into_inner().tags;
            if tags.len() > leaf_api::tag::MAX_TAGS_PER_REQUEST {
                return Err(ApiError::invalid(format!(
                    "a batch creates 1 to {} tags, not {}",
                    leaf_api::tag::MAX_TAGS_PER_REQUEST,
                    tags.len()
                )));
            }
            let tags = tags.into_iter().map(http_request).collect::<Result<Vec<_>, _>>()?;
            self.app.create_tags(leaf_api::types::CreateTagsRequest { tags }, &who).await
        }
        .await;
        let r = r.map(|done| CreateTagsResponse { created: done.created, existing: done.existing });
        Ids::answer(&self.app, GrpcMethod::CreateTags, r)
    }

    async fn get_tag(&self, req: Request<GetTagRequest>) -> Result<Response<Tag>, Status> {
        let r = async {
            let who = self.authorize(&req)?;
            self.app.show_tag(req.into_inner().tag, &who).await
        }
        .await;
        Ids::answer(&self.app, GrpcMethod::GetTag, r.map(Tag::from))
    }

    async fn archive_tag(&self, req: Request<GetTagRequest>) -> Result<Response<Tag>, Status> {
        let r = async {
            let who = self.authorize(&req)?;
            self.app.archive_tag(req.into_inner().tag, &who).await
        }
        .await;
        Ids::answer(&self.app, GrpcMethod::ArchiveTag, r.map(Tag::from))
    }

    async fn restore_tag(&self, req: Request<GetTagRequest>) -> Result<Response<Tag>, Status> {
        let r = async {
            let who = self.authorize(&req)?;
            self.app.restore_tag(req.into_inner().tag, &who).await
        }
        .await;
        Ids::answer(&self.app, GrpcMethod::RestoreTag, r.map(Tag::from))
    }

    async fn list_templates(&self, req: Request<ListTemplatesRequest>) -> Result<Response<TemplateList>, Status> {
        let r = self.authorize(&req).and_then(|who| self.app.list_templates(&who));
        let r = r.map(|l| TemplateList { templates: l.templates.into_iter().map(Template::from).collect() });
        Ids::answer(&self.app, GrpcMethod::ListTemplates, r)
    }

    async fn put_template(&self, req: Request<PutTemplateRequest>) -> Result<Response<Template>, Status> {
        let r = async {
            let who = self.authorize(&req)?;
            let (name, body) = http_template(req.into_inner())?;
            self.app.put_template(name, body, &who).await
        }
        .await;
        Ids::answer(&self.app, GrpcMethod::PutTemplate, r.map(Template::from))
    }

    async fn delete_template(&self, req: Request<DeleteTemplateRequest>) -> Result<Response<Template>, Status> {
        let r = async {
            let who = self.authorize(&req)?;
            self.app.delete_template(req.into_inner().name, &who).await
        }
        .await;
        Ids::answer(&self.app, GrpcMethod::DeleteTemplate, r.map(Template::from))
    }
}
