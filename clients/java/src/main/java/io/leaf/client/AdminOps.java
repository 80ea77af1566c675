package io.leaf.client;

import java.util.ArrayList;
import java.util.List;

/**
 * Every admin call, defined once as an {@link Op}, with its retry safety as the Rust client's
 * {@code admin.rs} sets it:
 * <ul>
 *   <li>at most once (retried only when the connection could not be opened): creating a tag,
 *       creating and revoking a token, deleting a template: a repeat after a lost answer
 *       would turn the success into {@code tag_exists}, a second token, or a
 *       {@code *_not_found};
 *   <li>idempotent: reads; a batch of tags (a repeat reports them existing); updating a tag and
 *       putting a template (absolute values); archiving and restoring; membership changes (a
 *       repeat answers the current membership); rotating a token (the caller keeps the newest
 *       bearer); the clock fault (an absolute offset).
 * </ul>
 */
final class AdminOps {
    /** The most tags a page of {@code GET /admin/tags} holds (and its default). */
    static final int MAX_LIST_PAGE = 50_000;

    private final OwnCreates ownCreates;

    AdminOps(OwnCreates ownCreates) {
        this.ownCreates = ownCreates;
    }

    Op<TagInfo> createTag(CreateTag spec) {
        Validate.tag("a tag", spec.tag());
        Call call = Call.post(Paths.ADMIN_TAGS, Json.write(spec.toJson()), Safety.AT_MOST_ONCE, null);
        return Op.json(call, TagInfo::fromJson).then(info -> {
            ownCreates.created(info.tag());
            return info;
        });
    }

    Op<CreateTagsResult> createTags(List<CreateTag> specs) {
        if (specs.isEmpty() || specs.size() > 10_000) {
            throw InvalidRequestException.local(ErrorCode.INVALID_REQUEST, "a batch holds 1 to 10,000 tags, got "
                    + specs.size());
        }
        List<Object> tags = new ArrayList<>();
        for (CreateTag s : specs) {
            Validate.tag("a tag", s.tag());
            tags.add(s.toJson());
        }
        Call call = Call.post(Paths.ADMIN_TAGS_BATCH, Json.write(Json.object("tags", tags)), Safety.IDEMPOTENT, null);
        return Op.json(call, CreateTagsResult::fromJson).then(r -> {
            r.created().forEach(ownCreates::created);
            return r;
        });
    }

    static Op<List<TagInfo>> tags(ListQuery q) {
        return Op.list(Call.get(q.on(Paths.ADMIN_TAGS)), TagInfo::fromJson);
    }

    /** Every tag {@code first} selects, page after page ({@code limit} per page), each page's last tag the next one's {@code after}. */
    static Paged<ListQuery, List<TagInfo>, TagInfo> allTags() {
        return new Paged<>() {
            @Override
            public Op<List<TagInfo>> page(ListQuery q) {
                return tags(q);
            }

            @Override
            public List<TagInfo> items(List<TagInfo> page) {
                return page;
            }

            @Override
            public ListQuery next(ListQuery q, List<TagInfo> page) {
                for (int i = 0; i < page.size(); i++) {
                    String before = i == 0 ? q.after() : page.get(i - 1).tag();
                    if (before != null && page.get(i).tag().compareTo(before) <= 0) {
                        throw new LeafDecodeException("(pages)", 200, "a page of the tag listing went backwards");
                    }
                }
                // A page shorter than asked for is the last (the server's default and most: 50,000 tags).
                int limit = q.limit() == null ? MAX_LIST_PAGE : q.limit();
                return page.size() < limit ? null : new ListQuery(q.prefix(), page.get(page.size() - 1).tag(), limit);
            }
        };
    }

    static Op<TagInfo> tag(String tag) {
        Validate.tag("a tag", tag);
        return Op.json(Call.about(Paths.fill(Paths.ADMIN_TAG, tag), tag), TagInfo::fromJson);
    }

    static Op<TagInfo> updateTag(String tag, TagUpdate update) {
        Validate.tag("a tag", tag);
        Call call = new Call("PATCH", Paths.fill(Paths.ADMIN_TAG, tag), Json.write(update.toJson()), Safety.IDEMPOTENT,
                0, tag);
        return Op.json(call, TagInfo::fromJson);
    }

    Op<TagInfo> archiveTag(String tag) {
        Validate.tag("a tag", tag);
        Call call = Call.post(Paths.fill(Paths.ADMIN_TAG_ARCHIVE, tag), null, Safety.IDEMPOTENT, null);
        return Op.json(call, TagInfo::fromJson).then(info -> {
            ownCreates.forget(tag);
            return info;
        });
    }

    static Op<TagInfo> restoreTag(String tag) {
        Validate.tag("a tag", tag);
        return Op.json(Call.post(Paths.fill(Paths.ADMIN_TAG_RESTORE, tag), null, Safety.IDEMPOTENT, tag),
                TagInfo::fromJson);
    }

    static Op<ObfuscatedId> decodeObfuscated(String tag, long id) {
        Validate.tag("a tag", tag);
        return Op.json(Call.about(Paths.fill(Paths.ADMIN_TAG_DECODE, tag, Long.toString(id)), tag),
                ObfuscatedId::fromJson);
    }

    static Op<AllocationJournal> allocations(String tag, Long node) {
        if (tag != null) {
            Validate.tag("a tag", tag);
        }
        return Op.json(Call.get(Paths.query(Paths.ADMIN_ALLOCATIONS, "tag", tag, "node", node)),
                AllocationJournal::fromJson);
    }

    static Op<AuditRecord.Page> audit(AuditRecord.Query q) {
        return Op.json(Call.get(q.on(Paths.ADMIN_AUDIT)), AuditRecord.Page::fromJson);
    }

    static Op<Dashboard> dashboard(String prefix) {
        return Op.json(Call.get(Paths.query(Paths.ADMIN_DASHBOARD, "prefix", prefix)), Dashboard::fromJson);
    }

    static Op<Long> setClockFault(long offsetMs) {
        Call call = Call.post(Paths.ADMIN_FAULT_CLOCK, Json.write(Json.object("offset_ms", offsetMs)), Safety.IDEMPOTENT,
                null);
        return Op.json(call, m -> Json.lng(m, "offset_ms"));
    }

    static Op<MembershipChange> addLearner(long nodeId, String addr) {
        Call call = Call.post(Paths.CLUSTER_LEARNERS, Json.write(Json.object("node_id", nodeId, "addr", addr)),
                Safety.IDEMPOTENT, null);
        return Op.json(call, MembershipChange::fromJson);
    }

    static Op<MembershipChange> promote(long nodeId) {
        String path = Paths.fill(Paths.CLUSTER_PROMOTE, Long.toString(nodeId));
        return Op.json(Call.post(path, null, Safety.IDEMPOTENT, null), MembershipChange::fromJson);
    }

    static Op<MembershipChange> removeNode(long nodeId) {
        Call call = new Call("DELETE", Paths.fill(Paths.CLUSTER_NODE, Long.toString(nodeId)), null, Safety.IDEMPOTENT,
                0, null);
        return Op.json(call, MembershipChange::fromJson);
    }

    static Op<List<TokenInfo>> tokens() {
        return Op.list(Call.get(Paths.ADMIN_TOKENS), TokenInfo::fromJson);
    }

    static Op<IssuedToken> createToken(CreateToken req) {
        Call call = Call.post(Paths.ADMIN_TOKENS, Json.write(req.toJson()), Safety.AT_MOST_ONCE, null);
        return Op.json(call, IssuedToken::fromJson);
    }

    static Op<TokenInfo> token(String id) {
        return Op.json(Call.get(Paths.fill(Paths.ADMIN_TOKEN, tokenId(id))), TokenInfo::fromJson);
    }

    static Op<TokenInfo> revokeToken(String id) {
        Call call = new Call("DELETE", Paths.fill(Paths.ADMIN_TOKEN, tokenId(id)), null, Safety.AT_MOST_ONCE, 0, null);
        return Op.json(call, TokenInfo::fromJson);
    }

    static Op<IssuedToken> rotateToken(String id, Long graceMs) {
        Call call = Call.post(Paths.fill(Paths.ADMIN_TOKEN_ROTATE, tokenId(id)),
                Json.write(Json.object("grace_ms", graceMs)), Safety.IDEMPOTENT, null);
        return Op.json(call, IssuedToken::fromJson);
    }

    static Op<List<TemplateInfo>> templates() {
        return Op.json(Call.get(Paths.ADMIN_TEMPLATES), m -> Json.objList(m, "templates", TemplateInfo::fromJson));
    }

    static Op<TemplateInfo> putTemplate(String name, TemplateInfo.Spec spec) {
        Call call = new Call("PUT", Paths.fill(Paths.ADMIN_TEMPLATE, name(name)), Json.write(spec.toJson()),
                Safety.IDEMPOTENT, 0, null);
        return Op.json(call, TemplateInfo::fromJson);
    }

    static Op<TemplateInfo> deleteTemplate(String name) {
        Call call = new Call("DELETE", Paths.fill(Paths.ADMIN_TEMPLATE, name(name)), null, Safety.AT_MOST_ONCE, 0, null);
        return Op.json(call, TemplateInfo::fromJson);
    }

    /** A token ID: 16 lowercase hex digits. */
    private static String tokenId(String id) {
        if (id == null || !id.matches("[0-9a-f]{16}")) {
            throw InvalidRequestException.local(ErrorCode.INVALID_REQUEST, "a token ID is 16 lowercase hex digits");
        }
        return id;
    }

    private static String name(String name) {
        return Validate.tag("a template name", name);
    }
}
