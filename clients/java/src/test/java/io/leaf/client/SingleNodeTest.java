package io.leaf.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The client against one real node: every call, and its typed errors. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SingleNodeTest {
    private static final String TAG = "leaf-segment-test";
    private static LeafNodes node;
    private static LeafClient client;

    @BeforeAll
    static void start() throws Exception {
        node = LeafNodes.single();
        client = LeafClient.builder().nodes(node.url(1)).token(LeafNodes.TOKEN).build();
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
    void segmentIdsSingleBatchAndRanges() {
        long one = client.nextId(TAG);
        long[] batch = client.nextIds(TAG, 50);
        assertEquals(50, batch.length);
        for (int i = 1; i < batch.length; i++) {
            assertTrue(batch[i] > batch[i - 1], "a batch is increasing");
        }
        assertTrue(batch[0] > one);
        List<IdRange> ranges = client.ranges(TAG, 5000);
        assertEquals(5000, ranges.stream().mapToLong(IdRange::count).sum());
        assertTrue(ranges.get(0).start() > batch[49]);
    }

    @Test
    void snowflakeIdsRangesAndDecode() {
        long one = client.snowflakeId("java-key");
        long[] batch = client.snowflakeIds("java-key", 100);
        Set<Long> seen = new HashSet<>();
        seen.add(one);
        for (long id : batch) {
            assertTrue(seen.add(id), "unique snowflake IDs");
        }
        List<IdRange> ranges = client.snowflakeRanges("java-key", 10_000);
        assertEquals(10_000, ranges.stream().mapToLong(IdRange::count).sum());
        SnowflakeId decoded = client.decodeSnowflake(one);
        assertEquals(one, decoded.id());
        assertTrue(Math.abs(decoded.timestampMs() - System.currentTimeMillis()) < 60_000, "a recent timestamp");
        assertEquals(client.decodeSnowflake(batch[0]).workerId(), decoded.workerId());
    }

    @Test
    void health() {
        Health h = client.health();
        assertTrue(h.ready());
        assertEquals(1, h.nodeId());
        assertEquals(Long.valueOf(1), h.leaderId());
        assertEquals("serving", h.snowflakeState());
    }

    @Test
    void createTagThenIdsAndTypedErrors() {
        TagInfo info = client.createTag(CreateTag.of("java-orders", 100).withMaxId(1000).withDescription("orders"));
        assertEquals("java-orders", info.tag());
        assertEquals("segment", info.profile());
        assertTrue(client.nextId("java-orders") >= 1000);
        assertEquals(100, client.tag("java-orders").step());

        ConflictException exists = assertThrows(ConflictException.class,
                () -> client.createTag(CreateTag.of("java-orders", 100)));
        assertEquals(ErrorCode.TAG_EXISTS, exists.code());
        assertEquals(409, exists.status());

        TagInfo archived = client.archiveTag("java-orders");
        assertTrue(archived.archived());
    }

    @Test
    void invalidTagIsRefusedLocallyAndUnknownTagIsNotFound() {
        InvalidRequestException local = assertThrows(InvalidRequestException.class, () -> client.nextId("bad tag"));
        assertEquals(ErrorCode.INVALID_TAG, local.code());
        assertEquals(400, local.status());
        assertTrue(local.isLocal());
        assertThrows(InvalidRequestException.class, () -> client.nextIds(TAG, 100_001));

        NotFoundException missing = assertThrows(NotFoundException.class, () -> client.nextId("no-such-tag"));
        assertEquals(ErrorCode.TAG_NOT_FOUND, missing.code());
        assertEquals(404, missing.status());
        assertFalse(missing.isLocal());
    }

    @Test
    void serverSide400() {
        InvalidRequestException bad = assertThrows(InvalidRequestException.class,
                () -> client.createTag(CreateTag.of("java-zero-step", 0)));
        assertEquals(ErrorCode.INVALID_REQUEST, bad.code());
        assertEquals(400, bad.status());
        assertFalse(bad.isLocal(), "the server refused it");
    }

    @Test
    void wrongTokenOnAnAdminCallIsUnauthorizedAndNeverEchoed() {
        String wrong = "wrong-token-0123456789abcdef";
        try (LeafClient bad = LeafClient.builder().nodes(node.url(1)).token(wrong).build()) {
            UnauthorizedException e = assertThrows(UnauthorizedException.class,
                    () -> bad.createTag(CreateTag.of("java-never", 10)));
            assertEquals(ErrorCode.UNAUTHORIZED, e.code());
            assertEquals(401, e.status());
            assertFalse(e.getMessage().contains(wrong));
            assertFalse(bad.toString().contains(wrong));
        }
        assertFalse(client.toString().contains(LeafNodes.TOKEN));
    }

    @Test
    void gaplessIssueReserveConfirmVoid() {
        client.createTag(CreateTag.gaplessSeries("java-inv", null));
        Gapless inv = client.gapless("java-inv");
        IssuedNumber first = inv.issue("order-1");
        assertEquals(1, first.number());
        assertEquals(NumberState.ISSUED, first.state());
        assertFalse(first.replayed());
        IssuedNumber again = inv.issue("order-1");
        assertEquals(first.number(), again.number());
        assertTrue(again.replayed());

        IssuedNumber reserved = inv.reserve("order-2", 60);
        assertEquals(2, reserved.number());
        assertEquals(NumberState.RESERVED, reserved.state());
        assertTrue(reserved.deadlineMs() != null && reserved.deadlineMs() > System.currentTimeMillis());
        IssuedNumber confirmed = inv.confirm("order-2");
        assertEquals(2, confirmed.number());
        assertEquals(NumberState.CONFIRMED, confirmed.state());

        IssuedNumber toVoid = inv.reserve("order-3", null);
        IssuedNumber voided = inv.voidNumber("order-3", "customer cancelled");
        assertEquals(toVoid.number(), voided.number());
        assertEquals(NumberState.VOIDED, voided.state());
        assertEquals("customer cancelled", voided.reason());
        assertNotEquals(voided.number(), inv.issue("order-4").number());

        ConflictException wrongProfile = assertThrows(ConflictException.class, () -> client.gapless(TAG).issue("k"));
        assertEquals(ErrorCode.WRONG_PROFILE, wrongProfile.code());
        assertThrows(InvalidRequestException.class, () -> inv.issue("bad\u0001key"));
    }

    @Test
    void aDeadNodeFirstIsSkipped() {
        String dead = "http://127.0.0.1:" + LeafNodes.freePort();
        try (LeafClient c = LeafClient.builder().nodes(dead, node.url(1)).backoff(Duration.ofMillis(5),
                Duration.ofMillis(20)).build()) {
            long[] ids = c.nextIds(TAG, 3);
            assertEquals(3, ids.length);
            assertArrayEquals(new long[] {ids[0], ids[0] + 1, ids[0] + 2}, ids);
        }
    }

    @Test
    void onlyDeadNodesIsAllNodesFailedCarryingTheLastError() {
        String dead = "http://127.0.0.1:" + LeafNodes.freePort();
        try (LeafClient c = LeafClient.builder().nodes(dead).retries(2)
                .backoff(Duration.ofMillis(5), Duration.ofMillis(20)).build()) {
            AllNodesFailedException e = assertThrows(AllNodesFailedException.class, () -> c.nextId(TAG));
            assertEquals(3, e.attempts());
            assertTrue(e.last() instanceof LeafTransportException);
            assertTrue(((LeafTransportException) e.last()).isConnect());
            assertTrue(e.isUnavailable());
        }
    }
}
