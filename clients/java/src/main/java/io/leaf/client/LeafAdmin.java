package io.leaf.client;

import java.io.OutputStream;
import java.time.Duration;
import java.util.List;

/**
 * The admin calls of a {@link LeafClient} ({@code client.admin()}), blocking; the token needs
 * the right each endpoint asks for ({@code tags}, {@code cluster}, or the admin token).
 * {@link AsyncLeafAdmin} has each of them returning a {@link java.util.concurrent.CompletableFuture}.
 *
 * <p>Retry safety, as the Rust client's: creating a tag or a token, revoking a token and
 * deleting a template are at most once (retried only when the connection could not be
 * opened); every other call is idempotent and retried like a read.
 */
public final class LeafAdmin {
    private final LeafClient client;
    private final AdminOps ops;

    LeafAdmin(LeafClient client, AdminOps ops) {
        this.client = client;
        this.ops = ops;
    }

    /** Creates a tag ({@code POST /admin/tags}). At most once: retried only when the connection could not be opened. For 3 s after, a {@code tag_not_found} for this tag from a node not yet caught up is retried. */
    public TagInfo createTag(CreateTag spec) {
        return client.run(ops.createTag(spec));
    }

    /** Creates the tags that do not exist ({@code POST /admin/tags:batch}, 1 to 10,000, idempotent); the others are reported as existing and left as they are. */
    public CreateTagsResult createTags(List<CreateTag> specs) {
        return client.run(ops.createTags(specs));
    }

    /** A page of the tags as stored, in name order ({@code GET /admin/tags}). */
    public List<TagInfo> tags(ListQuery query) {
        return client.run(AdminOps.tags(query));
    }

    /** The tag as the cluster stores it ({@code GET /admin/tags/{tag}}). */
    public TagInfo tag(String tag) {
        return client.run(AdminOps.tag(tag));
    }

    /** Changes a tag's stored settings ({@code PATCH /admin/tags/{tag}}, idempotent): absent fields are left unchanged. */
    public TagInfo updateTag(String tag, TagUpdate update) {
        return client.run(AdminOps.updateTag(tag, update));
    }

    /** Archives the tag ({@code POST /admin/tags/{tag}/archive}, idempotent): it hands out no ID until restored. */
    public TagInfo archiveTag(String tag) {
        return client.run(ops.archiveTag(tag));
    }

    /** Brings an archived tag back ({@code POST /admin/tags/{tag}/restore}, idempotent): it serves again from where its counter stopped. */
    public TagInfo restoreTag(String tag) {
        return client.run(AdminOps.restoreTag(tag));
    }

    /** An obfuscated tag's ID back to its sequence number ({@code GET /admin/tags/{tag}/decode/{id}}). */
    public ObfuscatedId decodeObfuscated(String tag, long id) {
        return client.run(AdminOps.decodeObfuscated(tag, id));
    }

    /** The answering node's journal of committed segments ({@code GET /admin/allocations}), of one tag and/or one owning node ({@code null}: all). */
    public AllocationJournal allocations(String tag, Long node) {
        return client.run(AdminOps.allocations(tag, node));
    }

    /** A page of the answering node's audit trail ({@code GET /admin/audit}). */
    public AuditRecord.Page audit(AuditRecord.Query query) {
        return client.run(AdminOps.audit(query));
    }

    /** What the built-in {@code /ui} page shows ({@code GET /admin/dashboard}), with only the tags starting with {@code prefix} ({@code null}: all). */
    public Dashboard dashboard(String prefix) {
        return client.run(AdminOps.dashboard(prefix));
    }

    /** Skews the answering node's clock by {@code offsetMs} ({@code POST /admin/fault/clock}; nodes started with fault injection only, else 404 {@code not_found}); answers the offset now in force. */
    public Long setClockFault(long offsetMs) {
        return client.run(AdminOps.setClockFault(offsetMs));
    }

    /** Adds a learner ({@code POST /admin/cluster/learners}, idempotent for the same ID and address). */
    public MembershipChange addLearner(long nodeId, String addr) {
        return client.run(AdminOps.addLearner(nodeId, addr));
    }

    /** Makes a learner a voter ({@code POST /admin/cluster/nodes/{id}/promote}, idempotent). */
    public MembershipChange promote(long nodeId) {
        return client.run(AdminOps.promote(nodeId));
    }

    /** Removes a member ({@code DELETE /admin/cluster/nodes/{id}}, idempotent); its ID is never reused. */
    public MembershipChange removeNode(long nodeId) {
        return client.run(AdminOps.removeNode(nodeId));
    }

    /** Every token ({@code GET /admin/tokens}; secrets are never shown again). */
    public List<TokenInfo> tokens() {
        return client.run(AdminOps.tokens());
    }

    /** Creates a scoped token ({@code POST /admin/tokens}, at most once); the answer holds its bearer, the only time it is shown. */
    public IssuedToken createToken(CreateToken request) {
        return client.run(AdminOps.createToken(request));
    }

    /** One token ({@code GET /admin/tokens/{id}}). */
    public TokenInfo token(String id) {
        return client.run(AdminOps.token(id));
    }

    /** Revokes a token ({@code DELETE /admin/tokens/{id}}, at most once): the token as it was. */
    public TokenInfo revokeToken(String id) {
        return client.run(AdminOps.revokeToken(id));
    }

    /** Gives a token a new secret ({@code POST /admin/tokens/{id}/rotate}); the old one keeps working for {@code graceMs} ({@code null}: the server's default, 0: refused at once). */
    public IssuedToken rotateToken(String id, Long graceMs) {
        return client.run(AdminOps.rotateToken(id, graceMs));
    }

    /** Every tag template, by name ({@code GET /admin/templates}). */
    public List<TemplateInfo> templates() {
        return client.run(AdminOps.templates());
    }

    /** Creates the template {@code name} or replaces it ({@code PUT /admin/templates/{name}}, idempotent). */
    public TemplateInfo putTemplate(String name, TemplateInfo.Spec spec) {
        return client.run(AdminOps.putTemplate(name, spec));
    }

    /** Deletes a template ({@code DELETE /admin/templates/{name}}, at most once); the tags it made stay. */
    public TemplateInfo deleteTemplate(String name) {
        return client.run(AdminOps.deleteTemplate(name));
    }

    // ---- the multi-region protocol, on a global tier (the `regions` right) ----

    /** Every region this global tier registered, retired ones too, by name ({@code GET /admin/regions}). */
    public List<Regions.Region> regions() {
        return client.run(RegionOps.regions());
    }

    /** Registers a region with this global tier ({@code POST /admin/regions}): a region ID and a run of {@code workers} snowflake worker IDs; a repeat answers the same record. */
    public Regions.Region joinRegion(String name, long workers) {
        return client.run(RegionOps.joinRegion(name, workers));
    }

    /** Retires a region ({@code POST /admin/regions/{name}/retire}): it gets no block any more; its name, ID and worker IDs are never reused. */
    public Regions.Region retireRegion(String name) {
        return client.run(RegionOps.retireRegion(name));
    }

    /** A block of {@code size} IDs of {@code tag} for {@code region}, starting at or above {@code above} ({@code null}: anywhere) ({@code POST /admin/regions/{name}/blocks/{tag}}). A repeat grants another block: the first is a gap, never a duplicate. */
    public IdRange grantBlock(String region, String tag, long size, Long above) {
        return client.run(RegionOps.grantBlock(region, tag, size, above));
    }

    /** Claims {@code tag}'s home for {@code region} ({@code POST /admin/regions/{name}/homes/{tag}}): the home, another region's if it claimed first. */
    public Regions.Home claimHome(String region, String tag) {
        return client.run(RegionOps.claimHome(region, tag));
    }

    /** {@code region} let go of {@code tag}, whose home moved away in {@code epoch} ({@code POST /admin/regions/{name}/homes/{tag}/release}). */
    public Regions.Home releaseHome(String region, String tag, long epoch) {
        return client.run(RegionOps.releaseHome(region, tag, epoch));
    }

    /** Renews {@code region}'s lease of its homes ({@code POST /admin/regions/{name}/lease}). */
    public Regions.Lease renewLease(String region) {
        return client.run(RegionOps.renewLease(region));
    }

    /** A page of homed tags' homes, in name order ({@code GET /admin/homes}). */
    public List<Regions.Home> homes(ListQuery query) {
        return client.run(RegionOps.homes(query));
    }

    /** Moves a monotonic tag's home to {@code region} ({@code POST /admin/homes/{tag}/move}); moving it where it is answers its home as it is. */
    public Regions.Home moveHome(String tag, String region) {
        return client.run(RegionOps.moveHome(tag, region));
    }

    /**
     * Every tag starting with {@code prefix} ({@code null}: every tag), page after page of
     * {@code GET /admin/tags}, checked to move forward.
     */
    public List<TagInfo> allTags(String prefix) {
        return client.all(AdminOps.allTags(), ListQuery.prefix(prefix));
    }

    /**
     * Downloads a backup of the whole replicated state from {@code node} (one of
     * {@link LeafClient#nodes()}) into {@code out} ({@code GET /admin/backup}, the root
     * credentials only), within {@code timeout}; returns the bytes written. Not retried: check
     * the file ({@code leaf restore} reads it) and try another node if need be.
     */
    public long backup(String node, OutputStream out, Duration timeout) {
        try {
            return backup(client, node, out, timeout).join();
        } catch (java.util.concurrent.CompletionException e) {
            throw LeafClient.leafError(e);
        }
    }

    static java.util.concurrent.CompletableFuture<Long> backup(LeafClient client, String node, OutputStream out,
            Duration timeout) {
        if (!client.nodes().contains(node)) {
            throw new IllegalArgumentException("not one of the client's nodes: " + node);
        }
        return client.transport().download(node, Paths.ADMIN_BACKUP, out, timeout);
    }
}
