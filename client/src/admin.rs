//! The admin endpoints (the client's token is sent as a bearer token): tags, the allocation
//! journal, membership, the fault clock.
//!
//! Retry safety (see [`crate::retry`]):
//! - creating a tag is **at most once**: retried only when the connection could not be
//!   opened, since a retry after a lost answer would turn the success into `tag_exists`;
//! - creating a batch of tags is idempotent: a repeat reports the tags the first attempt
//!   created as existing;
//! - updating a tag sets absolute values: idempotent;
//! - adding a learner (same ID and address), promoting and removing are idempotent at the
//!   leader: a repeat answers the current membership;
//! - setting the clock fault sets an absolute offset: idempotent;
//! - creating and revoking a token are **at most once** (a repeat would mint a second token,
//!   or answer `token_not_found` for a revocation that worked); rotating one may be repeated
//!   (the caller keeps the newest bearer, the one the cluster holds);
//! - listing and showing are reads, the audit trail too; so is a backup, which the caller
//!   downloads from one node at a time ([`Client::download_backup`]) and checks before
//!   trying the next.
use hyper::Method;
use leaf_api::audit::{AuditFilter, AuditPage};
use leaf_api::regions::{
    BlockGrant, BlockRequest, HomeInfo, HomeLease, HomeList, JoinRegionRequest, MoveHomeRequest, RegionInfo,
    RegionList, ReleaseHomeRequest,
};
use leaf_api::routes;
use leaf_api::template::{PutTemplateRequest, TemplateInfo, TemplateList};
use leaf_api::tokens::{CreateTokenRequest, IssuedToken, RotateTokenRequest, TokenId, TokenInfo};
use leaf_api::types::{
    AddLearnerRequest, AllocationJournal, ClockFault, CreateTagRequest, CreateTagsRequest, CreateTagsResponse,
    ListQuery, MembershipChange, ObfuscatedDecoded, TagInfo, UpdateTagRequest,
};

use crate::client::{Call, Client};
use crate::error::ClientError;
use crate::retry::Safety;

impl Client {
    /// Downloads a backup from `node` (one of [`Client::nodes`]) into `out`
    /// (`GET /admin/backup`), each part of the answer within `idle` of the last; returns the
    /// bytes written. Not retried: the caller checks the file and moves on to another node.
    pub async fn download_backup(
        &self,
        node: &str,
        out: &mut (impl tokio::io::AsyncWrite + Unpin),
        idle: std::time::Duration,
    ) -> Result<u64, ClientError> {
        self.inner.transport.download(node, routes::ADMIN_BACKUP, self.inner.auth.as_ref(), out, idle).await
    }

    /// Every tag (`GET /admin/tags`, page after page).
    pub async fn tags(&self) -> Result<Vec<TagInfo>, ClientError> {
        self.tags_matching(&ListQuery::default()).await
    }

    /// Every tag `query` selects (those starting with its `prefix`, after its `after`):
    /// `GET /admin/tags` page after page of its `limit` (default and most
    /// [`leaf_api::tag::MAX_LIST_PAGE`]), each page's last tag the next one's `after`, until a
    /// page is short.
    pub async fn tags_matching(&self, query: &ListQuery) -> Result<Vec<TagInfo>, ClientError> {
        let limit = query.limit.unwrap_or(leaf_api::tag::MAX_LIST_PAGE);
        let mut all: Vec<TagInfo> = Vec::new();
        let mut after = query.after.clone();
        loop {
            let q = ListQuery { prefix: query.prefix.clone(), after: after.clone(), limit: Some(limit) };
            let page = self.tags_page(&q).await?;
            // Each page must move forward: a repeat or a tag out of order would loop forever.
            if page.first().is_some_and(|t| after.as_ref().is_some_and(|a| &t.tag <= a))
                || page.windows(2).any(|w| w[0].tag >= w[1].tag)
            {
                return Err(ClientError::Request("a page of the tag listing went backwards".into()));
            }
            let full = page.len() >= limit as usize;
            after = page.last().map(|t| t.tag.clone());
            all.extend(page);
            if !full {
                return Ok(all);
            }
        }
    }

    /// One page of `GET /admin/tags` (see [`ListQuery`]).
    pub async fn tags_page(&self, query: &ListQuery) -> Result<Vec<TagInfo>, ClientError> {
        self.execute(Call::get(with_query(routes::ADMIN_TAGS, query))).await?.json()
    }

    /// `POST /admin/tags` (at most once, see the module docs).
    pub async fn create_tag(&self, req: &CreateTagRequest) -> Result<TagInfo, ClientError> {
        let call = Call::with_json(Method::POST, routes::ADMIN_TAGS.to_string(), req, Safety::AtMostOnce)?;
        let info: TagInfo = self.execute(call).await?.json()?;
        self.inner.own_creates.created([info.tag.as_str()]);
        Ok(info)
    }

    /// `POST /admin/tags:batch` (idempotent): creates the tags that do not exist; the others
    /// are reported as existing and left as they are.
    pub async fn create_tags(&self, req: &CreateTagsRequest) -> Result<CreateTagsResponse, ClientError> {
        let call = Call::with_json(Method::POST, routes::ADMIN_TAGS_BATCH.to_string(), req, Safety::Idempotent)?;
        let done: CreateTagsResponse = self.execute(call).await?.json()?;
        self.inner.own_creates.created(done.created.iter().map(String::as_str));
        Ok(done)
    }

    /// `GET /admin/tags/{tag}`.
    pub async fn tag(&self, tag: &str) -> Result<TagInfo, ClientError> {
        self.execute(Call::get(routes::fill(routes::ADMIN_TAG, &[tag])).about(tag)).await?.json()
    }

    /// `GET /admin/tags/{tag}/decode/{id}`: an obfuscated tag's ID back to its sequence number.
    pub async fn decode_obfuscated(&self, tag: &str, id: i64) -> Result<ObfuscatedDecoded, ClientError> {
        self.execute(Call::get(routes::fill(routes::ADMIN_TAG_DECODE, &[tag, &id.to_string()])).about(tag))
            .await?
            .json()
    }

    /// `PATCH /admin/tags/{tag}`: absent fields are left unchanged.
    pub async fn update_tag(&self, tag: &str, req: &UpdateTagRequest) -> Result<TagInfo, ClientError> {
        let call = Call::with_json(Method::PATCH, routes::fill(routes::ADMIN_TAG, &[tag]), req, Safety::Idempotent)?;
        self.execute(call.about(tag)).await?.json()
    }

    /// `POST /admin/tags/{tag}/archive` (idempotent): the tag, archived.
    pub async fn archive_tag(&self, tag: &str) -> Result<TagInfo, ClientError> {
        let path = routes::fill(routes::ADMIN_TAG_ARCHIVE, &[tag]);
        let info =
            self.execute(Call { method: Method::POST, safety: Safety::Idempotent, ..Call::get(path) }).await?.json()?;
        self.inner.own_creates.forget(tag);
        Ok(info)
    }

    /// `POST /admin/tags/{tag}/restore` (idempotent): the tag, serving again.
    pub async fn restore_tag(&self, tag: &str) -> Result<TagInfo, ClientError> {
        let path = routes::fill(routes::ADMIN_TAG_RESTORE, &[tag]);
        self.execute(Call { method: Method::POST, safety: Safety::Idempotent, ..Call::get(path) }.about(tag))
            .await?
            .json()
    }

    /// `GET /admin/allocations`: the answering node's journal, optionally of one tag and/or
    /// one owning node.
    pub async fn allocations(&self, tag: Option<&str>, node: Option<u64>) -> Result<AllocationJournal, ClientError> {
        let mut query = form_urlencoded::Serializer::new(String::new());
        if let Some(tag) = tag {
            query.append_pair("tag", tag);
        }
        if let Some(node) = node {
            query.append_pair("node", &node.to_string());
        }
        let query = query.finish();
        let path = if query.is_empty() {
            routes::ADMIN_ALLOCATIONS.to_string()
        } else {
            format!("{}?{query}", routes::ADMIN_ALLOCATIONS)
        };
        self.execute(Call::get(path)).await?.json()
    }

    /// `POST /admin/cluster/learners`.
    pub async fn add_learner(&self, req: &AddLearnerRequest) -> Result<MembershipChange, ClientError> {
        let call = Call::with_json(Method::POST, routes::CLUSTER_LEARNERS.to_string(), req, Safety::Idempotent)?;
        self.execute(call).await?.json()
    }

    /// `POST /admin/cluster/nodes/{id}/promote`.
    pub async fn promote(&self, node_id: u64) -> Result<MembershipChange, ClientError> {
        let path = routes::fill(routes::CLUSTER_PROMOTE, &[&node_id.to_string()]);
        self.execute(Call { method: Method::POST, ..Call::get(path) }).await?.json()
    }

    /// `DELETE /admin/cluster/nodes/{id}`.
    pub async fn remove(&self, node_id: u64) -> Result<MembershipChange, ClientError> {
        let path = routes::fill(routes::CLUSTER_NODE, &[&node_id.to_string()]);
        self.execute(Call { method: Method::DELETE, ..Call::get(path) }).await?.json()
    }

    /// `GET /admin/tokens`.
    pub async fn tokens(&self) -> Result<Vec<TokenInfo>, ClientError> {
        self.execute(Call::get(routes::ADMIN_TOKENS.to_string())).await?.json()
    }

    /// `POST /admin/tokens` (at most once): the answer holds the bearer, shown only now.
    pub async fn create_token(&self, req: &CreateTokenRequest) -> Result<IssuedToken, ClientError> {
        let call = Call::with_json(Method::POST, routes::ADMIN_TOKENS.to_string(), req, Safety::AtMostOnce)?;
        self.execute(call).await?.json()
    }

    /// `GET /admin/tokens/{id}`.
    pub async fn token(&self, id: TokenId) -> Result<TokenInfo, ClientError> {
        self.execute(Call::get(routes::fill(routes::ADMIN_TOKEN, &[&id.to_string()]))).await?.json()
    }

    /// `DELETE /admin/tokens/{id}` (at most once): the token as it was.
    pub async fn revoke_token(&self, id: TokenId) -> Result<TokenInfo, ClientError> {
        let path = routes::fill(routes::ADMIN_TOKEN, &[&id.to_string()]);
        self.execute(Call { method: Method::DELETE, safety: Safety::AtMostOnce, ..Call::get(path) }).await?.json()
    }

    /// `GET /admin/regions` (a global tier): every region it registered, by name.
    pub async fn regions(&self) -> Result<RegionList, ClientError> {
        self.execute(Call::get(routes::ADMIN_REGIONS.to_string())).await?.json()
    }

    /// `POST /admin/regions` (a global tier): registers a region; a repeat answers the same
    /// record, so it is retried.
    pub async fn join_region(&self, req: &JoinRegionRequest) -> Result<RegionInfo, ClientError> {
        let call = Call::with_json(Method::POST, routes::ADMIN_REGIONS.to_string(), req, Safety::Idempotent)?;
        self.execute(call).await?.json()
    }

    /// `POST /admin/regions/{name}/retire` (a global tier); a repeat answers the same record.
    pub async fn retire_region(&self, name: &str) -> Result<RegionInfo, ClientError> {
        let path = routes::fill(routes::ADMIN_REGION_RETIRE, &[name]);
        self.execute(Call { method: Method::POST, safety: Safety::Idempotent, ..Call::get(path) }).await?.json()
    }

    /// `POST /admin/regions/{name}/blocks/{tag}` (a global tier): a block of `tag`'s IDs.
    /// Retried: a repeat grants another block and leaves the first a gap, never a duplicate.
    pub async fn grant_block(&self, region: &str, tag: &str, req: &BlockRequest) -> Result<BlockGrant, ClientError> {
        let path = routes::fill(routes::ADMIN_REGION_BLOCKS, &[region, tag]);
        self.execute(Call::with_json(Method::POST, path, req, Safety::Idempotent)?).await?.json()
    }

    /// `POST /admin/regions/{name}/homes/{tag}` (a global tier): claims `tag`'s home for the
    /// region; answers the home (another region's if it claimed first). Retried: a repeat
    /// answers the same home.
    pub async fn claim_home(&self, region: &str, tag: &str) -> Result<HomeInfo, ClientError> {
        let path = routes::fill(routes::ADMIN_REGION_HOME, &[region, tag]);
        self.execute(Call { method: Method::POST, safety: Safety::Idempotent, ..Call::get(path) }).await?.json()
    }

    /// `POST /admin/regions/{name}/homes/{tag}/release` (a global tier): the region let go of
    /// `tag`, whose home moved away in `epoch`. Retried: a repeat changes nothing.
    pub async fn release_home(&self, region: &str, tag: &str, epoch: u32) -> Result<HomeInfo, ClientError> {
        let path = routes::fill(routes::ADMIN_REGION_HOME_RELEASE, &[region, tag]);
        let body = ReleaseHomeRequest { epoch };
        self.execute(Call::with_json(Method::POST, path, &body, Safety::Idempotent)?).await?.json()
    }

    /// `POST /admin/regions/{name}/lease` (a global tier): renews the region's lease of its
    /// homes. Retried: the caller measures its lease from before this call, so from before
    /// any attempt.
    pub async fn renew_lease(&self, region: &str) -> Result<HomeLease, ClientError> {
        let path = routes::fill(routes::ADMIN_REGION_LEASE, &[region]);
        self.execute(Call { method: Method::POST, safety: Safety::Idempotent, ..Call::get(path) }).await?.json()
    }

    /// `GET /admin/homes` (a global tier): homed tags' homes, a page in name order.
    pub async fn homes(&self, q: &ListQuery) -> Result<HomeList, ClientError> {
        self.execute(Call::get(with_query(routes::ADMIN_HOMES, q))).await?.json()
    }

    /// `POST /admin/homes/{tag}/move` (a global tier): moves `tag`'s home to `region`. Retried:
    /// moving a tag where it is answers its home as it is.
    pub async fn move_home(&self, tag: &str, region: &str) -> Result<HomeInfo, ClientError> {
        let path = routes::fill(routes::ADMIN_HOME_MOVE, &[tag]);
        let body = MoveHomeRequest { region: region.to_string() };
        self.execute(Call::with_json(Method::POST, path, &body, Safety::Idempotent)?).await?.json()
    }

    /// `GET /admin/templates`: every tag template, by name.
    pub async fn templates(&self) -> Result<TemplateList, ClientError> {
        self.execute(Call::get(routes::ADMIN_TEMPLATES.to_string())).await?.json()
    }

    /// `PUT /admin/templates/{name}`: creates the template or replaces it (a repeat stores the
    /// same, so it is retried).
    pub async fn put_template(&self, name: &str, req: &PutTemplateRequest) -> Result<TemplateInfo, ClientError> {
        let path = routes::fill(routes::ADMIN_TEMPLATE, &[name]);
        self.execute(Call::with_json(Method::PUT, path, req, Safety::Idempotent)?).await?.json()
    }

    /// `DELETE /admin/templates/{name}` (at most once: a repeat would answer
    /// `template_not_found`). The tags it made stay.
    pub async fn delete_template(&self, name: &str) -> Result<TemplateInfo, ClientError> {
        let path = routes::fill(routes::ADMIN_TEMPLATE, &[name]);
        self.execute(Call { method: Method::DELETE, safety: Safety::AtMostOnce, ..Call::get(path) }).await?.json()
    }

    /// `POST /admin/tokens/{id}/rotate`: the new bearer.
    pub async fn rotate_token(&self, id: TokenId, req: &RotateTokenRequest) -> Result<IssuedToken, ClientError> {
        let path = routes::fill(routes::ADMIN_TOKEN_ROTATE, &[&id.to_string()]);
        self.execute(Call::with_json(Method::POST, path, req, Safety::Idempotent)?).await?.json()
    }

    /// `GET /admin/audit`: a page of the answering node's audit trail, records after
    /// `after_seq` passing `filter`, at most `limit` (the node's default when `None`).
    pub async fn audit(
        &self,
        filter: &AuditFilter,
        after_seq: Option<u64>,
        limit: Option<u32>,
    ) -> Result<AuditPage, ClientError> {
        let mut q = form_urlencoded::Serializer::new(String::new());
        if let Some(k) = filter.kind {
            q.append_pair("kind", k.as_str());
        }
        if let Some(t) = &filter.tag {
            q.append_pair("tag", t);
        }
        if let Some(t) = filter.token {
            q.append_pair("token", &t.to_string());
        }
        for (name, v) in [("since_ms", filter.since_ms), ("until_ms", filter.until_ms)] {
            if let Some(v) = v {
                q.append_pair(name, &v.to_string());
            }
        }
        if let Some(s) = after_seq {
            q.append_pair("after_seq", &s.to_string());
        }
        if let Some(l) = limit {
            q.append_pair("limit", &l.to_string());
        }
        let q = q.finish();
        let path = if q.is_empty() { routes::ADMIN_AUDIT.to_string() } else { format!("{}?{q}", routes::ADMIN_AUDIT) };
        self.execute(Call::get(path)).await?.json()
    }

    /// `GET /admin/dashboard`: what the built-in `/ui` page shows, as the answering node sees
    /// it (the `cluster` right).
    pub async fn dashboard(&self) -> Result<leaf_api::dashboard::Dashboard, ClientError> {
        self.execute(Call::get(routes::ADMIN_DASHBOARD.to_string())).await?.json()
    }

    /// `GET /admin/dashboard?prefix=`: the dashboard with only the tags that start with `prefix`.
    pub async fn dashboard_matching(&self, prefix: &str) -> Result<leaf_api::dashboard::Dashboard, ClientError> {
        let query = form_urlencoded::Serializer::new(String::new()).append_pair("prefix", prefix).finish();
        self.execute(Call::get(format!("{}?{query}", routes::ADMIN_DASHBOARD))).await?.json()
    }

    /// `POST /admin/fault/clock` (nodes started with fault injection only): answers the
    /// offset now in force.
    pub async fn set_clock_fault(&self, fault: &ClockFault) -> Result<ClockFault, ClientError> {
        let call = Call::with_json(Method::POST, routes::ADMIN_FAULT_CLOCK.to_string(), fault, Safety::Idempotent)?;
        self.execute(call).await?.json()
    }
}

/// `path` with a listing's query string, if it sets anything.
pub(crate) fn with_query(path: &str, query: &ListQuery) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    if let Some(p) = &query.prefix {
        q.append_pair("prefix", p);
    }
    if let Some(a) = &query.after {
        q.append_pair("after", a);
    }
    if let Some(l) = query.limit {
        q.append_pair("limit", &l.to_string());
    }
    let q = q.finish();
    if q.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{q}")
    }
}
