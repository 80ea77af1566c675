package io.leaf.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Every admin call against a real node, blocking and (for a sample) async. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class AdminTest {
    private static LeafNodes node;
    private static LeafClient client;
    private static LeafAdmin admin;

    @BeforeAll
    static void start() throws Exception {
        node = LeafNodes.single();
        client = LeafClient.builder().nodes(node.url(1)).token(LeafNodes.TOKEN).build();
        admin = client.admin();
    }

    @AfterAll
    static void stop() {
        if (client != null) {
            client.close();
        }
        if (node != null) {
            node.close();
        }
    }

    @Test
    void tagsBatchListPagesUpdateArchiveRestore() throws Exception {
        admin.createTag(CreateTag.of("bt-a", 100));
        List<CreateTag> batch = new ArrayList<>();
        for (String t : List.of("bt-a", "bt-b", "bt-c", "bt-d", "bt-e")) {
            batch.add(CreateTag.of(t, 100).withDescription("batch"));
        }
        CreateTagsResult r = admin.createTags(batch);
        assertEquals(List.of("bt-b", "bt-c", "bt-d", "bt-e"), r.created());
        assertEquals(List.of("bt-a"), r.existing());
        assertEquals(List.of("bt-a", "bt-b"), admin.tags(new ListQuery("bt-", null, 2)).stream().map(TagInfo::tag).toList());
        // Page after page of 2: the walk follows each page's last tag and stops at a short page.
        List<TagInfo> paged = client.all(AdminOps.allTags(), new ListQuery("bt-", null, 2));
        assertEquals(List.of("bt-a", "bt-b", "bt-c", "bt-d", "bt-e"), paged.stream().map(TagInfo::tag).toList());
        assertEquals(5, admin.allTags("bt-").size());
        assertEquals(5, client.async().admin().allTags("bt-").get(30, TimeUnit.SECONDS).size());

        TagInfo updated = admin.updateTag("bt-b", new TagUpdate(250L, "changed", null, null));
        assertEquals(250, updated.step());
        assertEquals("changed", admin.tag("bt-b").description());
        assertThrows(InvalidRequestException.class, () -> admin.updateTag("bt-b", new TagUpdate(null, null, null, null)));

        long before = client.nextId("bt-c");
        assertTrue(admin.archiveTag("bt-c").archived());
        assertEquals(ErrorCode.TAG_NOT_FOUND, assertThrows(NotFoundException.class, () -> client.nextId("bt-c")).code());
        assertFalse(admin.restoreTag("bt-c").archived());
        assertTrue(client.nextId("bt-c") > before, "serves again from where its counter stopped");
    }

    @Test
    void obfuscatedDecodeAllocationsAuditDashboard() {
        admin.createTag(CreateTag.of("adm-obf", 100).withProfile(Profile.OBFUSCATED));
        long id = client.nextId("adm-obf");
        ObfuscatedId d = admin.decodeObfuscated("adm-obf", id);
        assertEquals("adm-obf", d.tag());
        assertEquals(id, d.id());
        assertTrue(d.sequence() >= 1, d.toString());

        AllocationJournal j = admin.allocations("adm-obf", null);
        assertEquals(1, j.nodeId());
        assertFalse(j.allocations().isEmpty());
        assertTrue(j.allocations().stream().allMatch(a -> a.tag().equals("adm-obf")));

        AuditRecord.Page page = admin.audit(new AuditRecord.Query("tag_created", "adm-obf", null, null, null, null, 10));
        assertEquals(1, page.records().size(), page.toString());
        AuditRecord rec = page.records().get(0);
        assertEquals("tag_created", rec.action());
        assertEquals("adm-obf", rec.details().get("tag"));
        assertEquals("admin_token", rec.actor());
        assertTrue(page.maxRecords() > 0);

        Dashboard dash = admin.dashboard("adm-");
        assertEquals(1, dash.nodeId());
        assertEquals("leader", dash.cluster().state());
        assertTrue(dash.tagsTotal() >= 1);
    }

    @Test
    void tokensCreateListShowRotateRevoke() throws Exception {
        admin.createTag(CreateTag.of("tok-orders", 100));
        IssuedToken issued = admin.createToken(CreateToken.of("orders-svc", List.of("ids"), List.of("tok-*"))
                .withQuota(1000, 100));
        String id = issued.token().id();
        assertEquals(16, id.length());
        assertFalse(issued.toString().contains(issued.bearer()), "the bearer never printed");
        assertEquals(Long.valueOf(1000), issued.token().ratePerSec());
        assertTrue(admin.tokens().stream().anyMatch(t -> t.id().equals(id)));
        assertEquals(List.of("ids"), admin.token(id).rights());
        assertEquals("orders-svc", client.async().admin().token(id).get(30, TimeUnit.SECONDS).name());
        // The bearer takes IDs of a tag its pattern covers, and nothing else.
        try (LeafClient scoped = LeafClient.builder().nodes(node.url(1)).token(issued.bearer()).build()) {
            assertTrue(scoped.nextId("tok-orders") > 0);
            assertThrows(ForbiddenException.class, () -> scoped.nextId("leaf-segment-test"));
        }
        IssuedToken rotated = admin.rotateToken(id, 0L);
        assertNotEquals(issued.bearer(), rotated.bearer());
        assertNotNull(rotated.token().rotatedMs());
        try (LeafClient old = LeafClient.builder().nodes(node.url(1)).token(issued.bearer()).retries(0).build();
                LeafClient fresh = LeafClient.builder().nodes(node.url(1)).token(rotated.bearer()).build()) {
            assertThrows(UnauthorizedException.class, () -> old.nextId("tok-orders"), "grace 0: refused at once");
            assertTrue(fresh.nextId("tok-orders") > 0);
            assertEquals(id, admin.revokeToken(id).id());
            LeafNodes.waitFor(Duration.ofSeconds(30), "the revocation applied",
                    () -> assertThrowsUnauthorized(fresh));
        }
        assertTrue(admin.tokens().stream().noneMatch(t -> t.id().equals(id)));
        assertThrows(NotFoundException.class, () -> admin.token(id));
        assertThrows(InvalidRequestException.class, () -> admin.token("not-an-id"));
    }

    private static boolean assertThrowsUnauthorized(LeafClient c) {
        try {
            c.nextId("tok-orders");
            return false;
        } catch (UnauthorizedException e) {
            return true;
        }
    }

    @Test
    void templatesPutListDelete() throws Exception {
        TemplateInfo t = admin.putTemplate("tenant-inv", TemplateInfo.Spec.of("tenant-*-inv", 50));
        assertEquals("tenant-*-inv", t.pattern());
        assertEquals(50, t.step());
        assertEquals(75, admin.putTemplate("tenant-inv", TemplateInfo.Spec.of("tenant-*-inv", 75)).step());
        assertTrue(admin.templates().stream().anyMatch(x -> x.name().equals("tenant-inv")));
        assertTrue(client.async().admin().templates().get(30, TimeUnit.SECONDS).stream()
                .anyMatch(x -> x.name().equals("tenant-inv")));
        assertEquals("tenant-inv", admin.deleteTemplate("tenant-inv").name());
        assertTrue(admin.templates().stream().noneMatch(x -> x.name().equals("tenant-inv")));
        assertEquals(ErrorCode.TEMPLATE_NOT_FOUND,
                assertThrows(NotFoundException.class, () -> admin.deleteTemplate("tenant-inv")).code());
    }

    @Test
    void gaplessLedgerExportPageAfterPage() {
        admin.createTag(CreateTag.gaplessSeries("adm-ledger", GaplessOptions.defaults()));
        Gapless g = client.gapless("adm-ledger");
        for (int i = 1; i <= 7; i++) {
            assertEquals(i, g.issue("key-" + i).number());
        }
        Ledger.Page first = g.ledgerPage(new Ledger.Query(null, null, null, 3, null));
        assertEquals(3, first.entries().size());
        assertNotNull(first.next(), "more after a full page");
        assertEquals(7, first.numbers());
        List<Ledger.Entry> all = client.all(Ledger.paged("adm-ledger"), new Ledger.Query(null, null, null, 3, null));
        assertEquals(List.of(1L, 2L, 3L, 4L, 5L, 6L, 7L), all.stream().map(Ledger.Entry::number).toList());
        assertEquals("key-7", all.get(6).key());
        assertEquals(7, g.ledger(null).size());
    }

    @Test
    void clusterStatusHealthModesMonitorAndMembership() {
        ClusterStatus s = client.clusterStatus();
        assertEquals(1, s.nodeId());
        assertEquals(Long.valueOf(1), s.leaderId());
        assertEquals(1, s.members().size());
        assertEquals("voter", s.members().get(0).role());
        assertTrue(s.health().ready());
        for (HealthMode m : HealthMode.values()) {
            HealthReport h = client.health(m);
            assertTrue(h.ready(), m + ": " + h);
            assertEquals(m, h.mode());
        }
        assertTrue(client.metrics().contains("leaf_"));
        assertTrue(client.db(ListQuery.prefix("leaf-")).stream().anyMatch(t -> t.tag().equals("leaf-segment-test")));
        client.nextId("leaf-segment-test");
        assertTrue(client.cache(ListQuery.prefix("leaf-")).stream().anyMatch(c -> c.tag().equals("leaf-segment-test")));
        // Promoting a voter is a no-op answering the membership.
        MembershipChange m = admin.promote(1);
        assertEquals(List.of(1L), m.voters());
        assertEquals(List.of(), m.learners());
        // Membership changes this one-node cluster must refuse, so that they change nothing: sent all
        // the same (ContractTest checks every listed operation was sent). Node IDs start at 1.
        assertThrows(LeafApiException.class, () -> admin.addLearner(0, "127.0.0.1:1"));
        assertThrows(NotFoundException.class, () -> admin.removeNode(99), "not a member");
        assertEquals(List.of(1L), client.clusterStatus().members().stream().map(ClusterStatus.Member::nodeId).toList());
    }

    @Test
    void clockFaultNeedsFaultInjectionAndBackupStreams() throws Exception {
        LeafApiException e = assertThrows(NotFoundException.class, () -> admin.setClockFault(0));
        assertEquals(ErrorCode.NOT_FOUND, e.code());
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        long n = admin.backup(node.url(1), out, Duration.ofSeconds(30));
        assertTrue(n > 0);
        assertEquals(n, out.size());
        ByteArrayOutputStream out2 = new ByteArrayOutputStream();
        assertTrue(client.async().admin().backup(node.url(1), out2, Duration.ofSeconds(30)).get(30, TimeUnit.SECONDS) > 0);
        try (LeafClient noToken = LeafClient.builder().nodes(node.url(1)).token("wrong-token-wrong-token").build()) {
            ByteArrayOutputStream none = new ByteArrayOutputStream();
            assertThrows(UnauthorizedException.class, () -> noToken.admin().backup(node.url(1), none, Duration.ofSeconds(30)));
            assertEquals(0, none.size(), "an error body is never written as a backup");
        }
    }
}
