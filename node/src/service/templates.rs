//! Tag templates (admin, over HTTP `/admin/templates*`): put, list and delete, root only (a
//! template decides which tags tokens may make); and making a tag from its template on the
//! tag's first ID request ([`App::make_from_template`]), the one way the ID path creates a tag.
use std::sync::Arc;

use leaf_api::template::{validate_template_name, PutTemplateRequest, TemplateInfo, TemplateList, TemplatePattern};
use leaf_api::tokens::Right;
use leaf_api::types::CreateTagRequest;
use leaf_api::ErrorCode;
use leaf_raft_store::{Applied, NewTemplate, Op, TemplateRecord, TemplateSettings};

use super::tags::new_tag;
use super::{ApiError, App};
use crate::access::{IdRequester, Principal};
use crate::raft::answer::{invalid, mismatch, wrong_kind, Answer, AnswerError};
use crate::tags::TagHandle;

impl App {
    /// Every template, by name.
    pub fn list_templates(&self, who: &Principal) -> Result<TemplateList, ApiError> {
        who.require_root("managing templates")?;
        let templates = self.raft.state().templates().into_iter().map(|(n, r)| template_info(n, r)).collect();
        Ok(TemplateList { templates })
    }

    /// Creates template `name` or replaces it. Its settings are checked as the creation of a
    /// tag it makes would be, so a template never makes a tag that would be refused.
    pub async fn put_template(
        &self,
        name: String,
        body: PutTemplateRequest,
        who: &Principal,
    ) -> Result<TemplateInfo, ApiError> {
        who.require_root("managing templates")?;
        validate_template_name(&name).map_err(|e| ApiError::invalid(e.to_string()))?;
        let pattern = TemplatePattern::parse(&body.pattern).map_err(|e| ApiError::invalid(e.to_string()))?;
        let settings = TemplateSettings {
            step: body.step,
            max_id: body.max_id,
            description: body.description.unwrap_or_default(),
            profile: body.profile.unwrap_or_default(),
            daily: body.daily,
            upper_bound: body.upper_bound,
        };
        if settings.profile == leaf_api::profile::Profile::Gapless {
            return Err(ApiError::invalid(format!(
                "template {name:?}: a template makes a tag on its first ID request, and a gapless tag serves no IDs; \
                 create gapless series with POST /admin/tags"
            )));
        }
        let (prefix, suffix) = pattern.parts();
        let sample = creation(&format!("{prefix}x{suffix}"), &settings);
        new_tag(sample, who).map_err(|e| ApiError { message: format!("template {name:?}: {}", e.message), ..e })?;
        let t = NewTemplate { name, pattern, settings };
        let (name, record): (String, TemplateRecord) =
            self.raft.propose(super::tag_admin::admin(who.actor(), Op::PutTemplate(t))).await?;
        tracing::info!(template = name, pattern = %record.pattern, "template put");
        Ok(template_info(name, record))
    }

    /// Deletes template `name`; the tags it made stay.
    pub async fn delete_template(&self, name: String, who: &Principal) -> Result<TemplateInfo, ApiError> {
        who.require_root("managing templates")?;
        validate_template_name(&name).map_err(|e| ApiError::invalid(e.to_string()))?;
        let (name, record): (String, TemplateRecord) =
            self.raft.propose(super::tag_admin::admin(who.actor(), Op::DeleteTemplate { name })).await?;
        tracing::info!(template = name, "template deleted");
        Ok(template_info(name, record))
    }

    /// `tag`, which does not exist (`missing` says so), made from the template whose pattern
    /// it matches, for an ID request by `caller`: the admin token, or a token with the `tags`
    /// right on it (counted against its `max_tags`, like any creation). A request without a
    /// token, or a tag no template makes, or an archived one, gets `missing`.
    pub(super) async fn make_from_template(
        &self,
        tag: &str,
        caller: IdRequester,
        missing: ApiError,
    ) -> Result<Arc<TagHandle>, ApiError> {
        let state = self.raft.state();
        let Some((name, template)) = state.template_for(tag) else { return Err(missing) };
        match state.tag(tag) {
            Some(r) if r.archived_ms().is_some() => return Err(missing), // its name is never made again
            // Made meanwhile by a concurrent first request, after this one missed it.
            Some(_) => return self.known(tag, |app| app.tags.get(tag)).await,
            None => {}
        }
        let Some(who) = self.access.principal_of(caller) else { return Err(missing) };
        if !who.may_on(Right::Tags, tag) {
            // Which template would make it is for the tags right to see, not this caller.
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                format!(
                    "tag {tag:?} does not exist, and making it on a first ID request needs the 'tags' right on it, \
                     which this caller has not"
                ),
            ));
        }
        let body = creation(tag, &template.settings);
        match self.create_tag(body, &who).await {
            Ok(_) => tracing::info!(tag, template = name, "tag made from its template"),
            // Made meanwhile by another request, perhaps through another node: known here once
            // applied here.
            Err(e) if e.code == ErrorCode::TagExists => super::tag_admin::seen_here(&self.raft, tag.to_string()).await,
            Err(e) => return Err(e),
        }
        self.known(tag, |app| app.tags.get(tag)).await
    }
}

/// The creation request of `tag` with the settings `s`.
fn creation(tag: &str, s: &TemplateSettings) -> CreateTagRequest {
    CreateTagRequest {
        tag: tag.to_string(),
        step: s.step,
        max_id: s.max_id,
        description: Some(s.description.clone()),
        profile: Some(s.profile),
        daily: s.daily.clone(),
        gapless: None,
        upper_bound: s.upper_bound,
    }
}

/// A template as the API shows it.
pub fn template_info(name: String, r: TemplateRecord) -> TemplateInfo {
    let s = r.settings;
    TemplateInfo {
        name,
        pattern: r.pattern,
        step: s.step,
        max_id: s.max_id,
        description: s.description,
        profile: s.profile,
        daily: s.daily,
        upper_bound: s.upper_bound,
        created_ms: r.created_ms,
        updated_ms: r.updated_ms,
    }
}

/// The leader's answer to a template change: the template asked for, as asked.
impl Answer for (String, TemplateRecord) {
    const ASKED: &'static str = "a template change";

    fn check(op: &Op, applied: &Applied) -> Result<(), AnswerError> {
        match (op, applied) {
            (Op::PutTemplate(t), Applied::Template { name, record }) => {
                if *name != t.name || record.pattern != t.pattern || record.settings != t.settings {
                    return Err(invalid(format!("template {name:?} answered with another name, pattern or settings")));
                }
                Ok(())
            }
            (Op::DeleteTemplate { name: asked }, Applied::Template { name, .. }) => {
                if name != asked {
                    return Err(invalid(format!("deletion answered for template {name:?}, asked for {asked:?}")));
                }
                Ok(())
            }
            (op, applied) => Err(mismatch(op, applied)),
        }
    }

    fn take(applied: Applied) -> Result<Self, AnswerError> {
        match applied {
            Applied::Template { name, record } => Ok((name, record)),
            other => Err(wrong_kind::<Self>(&other)),
        }
    }
}
