package dev.dex.actors;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import java.util.concurrent.CompletionStage;

import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.AskPattern;

/**
 * The Java face of a {@link DexClient} actor: every call returns a {@link CompletionStage}, completed
 * exceptionally with {@link DexException} when the cluster answers an error (a bad key, a scan too long,
 * memory full, a partition that stayed unreachable).
 */
public final class DexClientApi {
    /** One entry of a scan. */
    public record Entry(long key, long value) {
    }

    private final ActorSystem<?> system;
    private final ActorRef<DexClient.Command> client;
    private final Duration timeout;

    public DexClientApi(ActorSystem<?> system, ActorRef<DexClient.Command> client, Duration timeout) {
        this.system = system;
        this.client = client;
        this.timeout = timeout;
    }

    public CompletionStage<OptionalLong> get(long key) {
        return AskPattern.<DexClient.Command, DexClient.Reply>ask(client, r -> new DexClient.Get(key, r), timeout, system.scheduler())
                .thenApply(reply -> {
                    check(reply.error());
                    return reply.found() ? OptionalLong.of(reply.value()) : OptionalLong.empty();
                });
    }

    /** Inserts or replaces; true if the key existed. */
    public CompletionStage<Boolean> put(long key, long value) {
        return AskPattern.<DexClient.Command, DexClient.Reply>ask(client, r -> new DexClient.Put(key, value, r), timeout, system.scheduler())
                .thenApply(reply -> {
                    check(reply.error());
                    return reply.found();
                });
    }

    /** Removes; true if the key existed. */
    public CompletionStage<Boolean> delete(long key) {
        return AskPattern.<DexClient.Command, DexClient.Reply>ask(client, r -> new DexClient.Delete(key, r), timeout, system.scheduler())
                .thenApply(reply -> {
                    check(reply.error());
                    return reply.found();
                });
    }

    /** Up to {@code count} entries with keys {@code >= start}, ascending, across partitions. */
    public CompletionStage<List<Entry>> scan(long start, int count) {
        return AskPattern.<DexClient.Command, DexClient.ScanReply>ask(client, r -> new DexClient.Scan(start, count, r), timeout,
                        system.scheduler())
                .thenApply(reply -> {
                    check(reply.error());
                    List<Entry> entries = new ArrayList<>(reply.keys().length);
                    for (int i = 0; i < reply.keys().length; i++) {
                        entries.add(new Entry(reply.keys()[i], reply.values()[i]));
                    }
                    return entries;
                });
    }

    private static void check(String error) {
        if (error != null) {
            throw new DexException(error);
        }
    }
}
