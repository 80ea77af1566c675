package io.leaf.client;

import java.io.OutputStream;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * The admin calls of a {@link LeafClient}, asynchronous ({@code client.async().admin()}): each
 * returns at once a {@link CompletableFuture} completed on the client's threads, with the same
 * attempts, failover, retry safety and deadline as {@link LeafAdmin} (whose documentation
 * each call shares). A failed future holds the {@link LeafException}; cancelling it stops the
 * call's attempts. An invalid argument fails the future too, nothing sent.
 */
public final class AsyncLeafAdmin {
    private final LeafClient client;
    private final AdminOps ops;

    AsyncLeafAdmin(LeafClient client, AdminOps ops) {
        this.client = client;
        this.ops = ops;
    }

    /** See {@link LeafAdmin#createTag}. */
    public CompletableFuture<TagInfo> createTag(CreateTag spec) {
        return client.async().run(() -> ops.createTag(spec));
    }

    /** See {@link LeafAdmin#createTags}. */
    public CompletableFuture<CreateTagsResult> createTags(List<CreateTag> specs) {
        return client.async().run(() -> ops.createTags(specs));
    }

    /** See {@link LeafAdmin#tags}. */
    public CompletableFuture<List<TagInfo>> tags(ListQuery query) {
        return client.async().run(() -> AdminOps.tags(query));
    }

    /** See {@link LeafAdmin#tag}. */
    public CompletableFuture<TagInfo> tag(String tag) {
        return client.async().run(() -> AdminOps.tag(tag));
    }

    /** See {@link LeafAdmin#updateTag}. */
    public CompletableFuture<TagInfo> updateTag(String tag, TagUpdate update) {
        return client.async().run(() -> AdminOps.updateTag(tag, update));
    }

    /** See {@link LeafAdmin#archiveTag}. */
    public CompletableFuture<TagInfo> archiveTag(String tag) {
        return client.async().run(() -> ops.archiveTag(tag));
    }

    /** See {@link LeafAdmin#restoreTag}. */
    public CompletableFuture<TagInfo> restoreTag(String tag) {
        return client.async().run(() -> AdminOps.restoreTag(tag));
    }

    /** See {@link LeafAdmin#decodeObfuscated}. */
    public CompletableFuture<ObfuscatedId> decodeObfuscated(String tag, long id) {
        return client.async().run(() -> AdminOps.decodeObfuscated(tag, id));
    }

    /** See {@link LeafAdmin#allocations}. */
    public CompletableFuture<AllocationJournal> allocations(String tag, Long node) {
        return client.async().run(() -> AdminOps.allocations(tag, node));
    }

    /** See {@link LeafAdmin#audit}. */
    public CompletableFuture<AuditRecord.Page> audit(AuditRecord.Query query) {
        return client.async().run(() -> AdminOps.audit(query));
    }

    /** See {@link LeafAdmin#dashboard}. */
    public CompletableFuture<Dashboard> dashboard(String prefix) {
        return client.async().run(() -> AdminOps.dashboard(prefix));
    }

    /** See {@link LeafAdmin#setClockFault}. */
    public CompletableFuture<Long> setClockFault(long offsetMs) {
        return client.async().run(() -> AdminOps.setClockFault(offsetMs));
    }

    /** See {@link LeafAdmin#addLearner}. */
    public CompletableFuture<MembershipChange> addLearner(long nodeId, String addr) {
        return client.async().run(() -> AdminOps.addLearner(nodeId, addr));
    }

    /** See {@link LeafAdmin#promote}. */
    public CompletableFuture<MembershipChange> promote(long nodeId) {
        return client.async().run(() -> AdminOps.promote(nodeId));
    }

    /** See {@link LeafAdmin#removeNode}. */
    public CompletableFuture<MembershipChange> removeNode(long nodeId) {
        return client.async().run(() -> AdminOps.removeNode(nodeId));
    }

    /** See {@link LeafAdmin#tokens}. */
    public CompletableFuture<List<TokenInfo>> tokens() {
        return client.async().run(() -> AdminOps.tokens());
    }

    /** See {@link LeafAdmin#createToken}. */
    public CompletableFuture<IssuedToken> createToken(CreateToken request) {
        return client.async().run(() -> AdminOps.createToken(request));
    }

    /** See {@link LeafAdmin#token}. */
    public CompletableFuture<TokenInfo> token(String id) {
        return client.async().run(() -> AdminOps.token(id));
    }

    /** See {@link LeafAdmin#revokeToken}. */
    public CompletableFuture<TokenInfo> revokeToken(String id) {
        return client.async().run(() -> AdminOps.revokeToken(id));
    }

    /** See {@link LeafAdmin#rotateToken}. */
    public CompletableFuture<IssuedToken> rotateToken(String id, Long graceMs) {
        return client.async().run(() -> AdminOps.rotateToken(id, graceMs));
    }

    /** See {@link LeafAdmin#templates}. */
    public CompletableFuture<List<TemplateInfo>> templates() {
        return client.async().run(() -> AdminOps.templates());
    }

    /** See {@link LeafAdmin#putTemplate}. */
    public CompletableFuture<TemplateInfo> putTemplate(String name, TemplateInfo.Spec spec) {
        return client.async().run(() -> AdminOps.putTemplate(name, spec));
    }

    /** See {@link LeafAdmin#deleteTemplate}. */
    public CompletableFuture<TemplateInfo> deleteTemplate(String name) {
        return client.async().run(() -> AdminOps.deleteTemplate(name));
    }

    /** See {@link LeafAdmin#regions}. */
    public CompletableFuture<List<Regions.Region>> regions() {
        return client.async().run(() -> RegionOps.regions());
    }

    /** See {@link LeafAdmin#joinRegion}. */
    public CompletableFuture<Regions.Region> joinRegion(String name, long workers) {
        return client.async().run(() -> RegionOps.joinRegion(name, workers));
    }

    /** See {@link LeafAdmin#retireRegion}. */
    public CompletableFuture<Regions.Region> retireRegion(String name) {
        return client.async().run(() -> RegionOps.retireRegion(name));
    }

    /** See {@link LeafAdmin#grantBlock}. */
    public CompletableFuture<IdRange> grantBlock(String region, String tag, long size, Long above) {
        return client.async().run(() -> RegionOps.grantBlock(region, tag, size, above));
    }

    /** See {@link LeafAdmin#claimHome}. */
    public CompletableFuture<Regions.Home> claimHome(String region, String tag) {
        return client.async().run(() -> RegionOps.claimHome(region, tag));
    }

    /** See {@link LeafAdmin#releaseHome}. */
    public CompletableFuture<Regions.Home> releaseHome(String region, String tag, long epoch) {
        return client.async().run(() -> RegionOps.releaseHome(region, tag, epoch));
    }

    /** See {@link LeafAdmin#renewLease}. */
    public CompletableFuture<Regions.Lease> renewLease(String region) {
        return client.async().run(() -> RegionOps.renewLease(region));
    }

    /** See {@link LeafAdmin#homes}. */
    public CompletableFuture<List<Regions.Home>> homes(ListQuery query) {
        return client.async().run(() -> RegionOps.homes(query));
    }

    /** See {@link LeafAdmin#moveHome}. */
    public CompletableFuture<Regions.Home> moveHome(String tag, String region) {
        return client.async().run(() -> RegionOps.moveHome(tag, region));
    }

    /** See {@link LeafAdmin#allTags}. */
    public CompletableFuture<List<TagInfo>> allTags(String prefix) {
        return client.async().all(AdminOps.allTags(), ListQuery.prefix(prefix));
    }

    /** See {@link LeafAdmin#backup}. */
    public CompletableFuture<Long> backup(String node, OutputStream out, Duration timeout) {
        try {
            return LeafAdmin.backup(client, node, out, timeout);
        } catch (IllegalArgumentException e) {
            return CompletableFuture.failedFuture(e);
        }
    }
}
