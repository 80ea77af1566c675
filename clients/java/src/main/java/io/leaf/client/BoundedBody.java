package io.leaf.client;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Flow;

/**
 * A response body read into memory up to {@link #MAX_BYTES}: past it the exchange is cancelled
 * and fails with {@link TooLarge}, so a broken or hostile node cannot make the client buffer an
 * unbounded answer. The largest answer the API sends is a batch of 100,000 IDs (about 2 MB).
 */
final class BoundedBody implements HttpResponse.BodySubscriber<byte[]> {
    /** 16 MiB, as the Python client. */
    static final int MAX_BYTES = 16 << 20;

    /** The answer was longer than the limit. */
    static final class TooLarge extends IOException {
        private static final long serialVersionUID = 1L;

        final int status;

        TooLarge(int status, int limit) {
            super("an answer of more than " + limit + " bytes");
            this.status = status;
        }
    }

    private final int status;
    private final int limit;
    private final ByteArrayOutputStream body = new ByteArrayOutputStream();
    private final CompletableFuture<byte[]> result = new CompletableFuture<>();
    private Flow.Subscription subscription;

    BoundedBody(int status, int limit) {
        this.status = status;
        this.limit = limit;
    }

    /** The handler that reads every answer this way. */
    static HttpResponse.BodyHandler<byte[]> handler(int limit) {
        return info -> new BoundedBody(info.statusCode(), limit);
    }

    @Override
    public CompletionStage<byte[]> getBody() {
        return result;
    }

    @Override
    public void onSubscribe(Flow.Subscription s) {
        subscription = s;
        s.request(Long.MAX_VALUE);
    }

    @Override
    public void onNext(List<ByteBuffer> buffers) {
        if (result.isDone()) {
            return;
        }
        for (ByteBuffer b : buffers) {
            if (body.size() + b.remaining() > limit) {
                subscription.cancel();
                result.completeExceptionally(new TooLarge(status, limit));
                return;
            }
            byte[] chunk = new byte[b.remaining()];
            b.get(chunk);
            body.write(chunk, 0, chunk.length);
        }
    }

    @Override
    public void onError(Throwable t) {
        result.completeExceptionally(t);
    }

    @Override
    public void onComplete() {
        result.complete(body.toByteArray());
    }
}
