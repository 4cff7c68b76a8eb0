package dev.dex.ycsb;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;

import org.apache.pekko.actor.typed.ActorSystem;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;

import dev.dex.actors.client.DexClient;
import dev.dex.actors.client.DexClientApi;
import dev.dex.actors.client.DexException;
import dev.dex.cluster.DexNodes;
import dev.dex.cluster.DexSettings;
import site.ycsb.ByteArrayByteIterator;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;

/**
 * YCSB's {@link DB} over the DEX client API ({@code docs/ycsb.md}). Records map onto the index as they can while
 * keys are 8-byte integers:
 * <ul>
 *   <li>a YCSB key is a prefix and a number ({@code user6284781860667377211}); the number is the index key, so
 *       scans run in the numbers' order. A key without a number, or one that does not fit a long, is refused;</li>
 *   <li>a record is one field ({@code fieldcount=1}) of at most 7 bytes ({@code fieldlength<=7}), kept in the
 *       index's 8-byte value as its length and bytes. A record of more fields or longer values is refused
 *       ({@link Status#BAD_REQUEST}), never truncated;</li>
 *   <li>the table name is ignored (one index per cluster).</li>
 * </ul>
 * The binding starts one client node per JVM (shared by YCSB's threads, each with a DB instance of its own) that joins
 * the cluster at {@code dex.seed} (HOST:PORT); {@code dex.host} is where it listens (default 127.0.0.1),
 * {@code dex.config} a HOCON file of further settings, {@code dex.timeout} how long an operation may take (30 s).
 *
 * <p>Concurrency: YCSB calls each instance from one thread; the shared client node is made by the first {@link #init}
 * and stopped by the last {@link #cleanup}, under the class's lock.
 */
public final class DexYcsbClient extends DB {
    /** The most value bytes one record holds: the 8-byte value keeps a length byte and these. */
    public static final int MAX_VALUE_BYTES = 7;

    private static final Object LOCK = new Object();
    private static ActorSystem<DexClient.Command> system;
    private static DexClientApi api;
    private static int users;

    private DexClientApi client;
    private String field = "field0";

    @Override
    public void init() throws DBException {
        Properties p = getProperties();
        int fields = Integer.parseInt(p.getProperty("fieldcount", "10"));
        int length = Integer.parseInt(p.getProperty("fieldlength", "100"));
        if (fields != 1 || length > MAX_VALUE_BYTES) {
            throw new DBException("the DEX binding keeps one field of at most " + MAX_VALUE_BYTES + " bytes per record"
                    + " (8-byte values): set fieldcount=1 and fieldlength<=" + MAX_VALUE_BYTES + ", not fieldcount=" + fields
                    + " and fieldlength=" + length + " (docs/ycsb.md)");
        }
        field = p.getProperty("fieldnameprefix", "field") + "0";
        synchronized (LOCK) {
            if (client != null) {
                return; // init twice on one instance: it is one user
            }
            if (api == null) {
                start(p);
            }
            users++;
            client = api;
        }
    }

    /**
     * Starts the shared client node: every property is checked before anything starts, and a node that does not join
     * the cluster within {@code dex.timeout} is stopped again. The caller holds {@link #LOCK}.
     */
    private static void start(Properties p) throws DBException {
        String seed = p.getProperty("dex.seed");
        if (seed == null || seed.isBlank()) {
            throw new DBException("dex.seed is not set: give the cluster's seed node, -p dex.seed=HOST:PORT");
        }
        Config config;
        Duration timeout;
        try {
            Config extra = ConfigFactory.empty();
            if (p.getProperty("dex.config") != null) {
                java.io.File file = new java.io.File(p.getProperty("dex.config"));
                if (!file.canRead()) {
                    throw new DBException("dex.config " + file + ": no such readable file");
                }
                extra = ConfigFactory.parseFile(file);
            }
            timeout = ConfigFactory.parseString("t = " + p.getProperty("dex.timeout", "30s")).getDuration("t");
            if (timeout.isNegative() || timeout.isZero()) {
                throw new DBException("dex.timeout must be positive: " + p.getProperty("dex.timeout"));
            }
            Config base = DexNodes.config(extra);
            config = DexNodes.withoutEndpoint(DexNodes.nodeConfig(base, "client",
                    p.getProperty("dex.host", base.getString("dex.node.host")), 0, List.of(seed)));
            DexSettings.from(config);
        } catch (RuntimeException e) {
            throw new DBException("the DEX binding's settings: " + e.getMessage(), e);
        }
        ActorSystem<DexClient.Command> started = DexNodes.client(config, DexSettings.from(config));
        try {
            long deadline = System.nanoTime() + timeout.toNanos();
            while (org.apache.pekko.cluster.typed.Cluster.get(started).selfMember().status() != org.apache.pekko.cluster.MemberStatus.up()) {
                if (System.nanoTime() > deadline) {
                    throw new DBException("the client node did not join the cluster at " + seed + " within " + timeout.toMillis()
                            + " ms; is a node running there?");
                }
                Thread.sleep(50);
            }
            api = new DexClientApi(started, started, timeout);
            system = started;
        } catch (DBException | RuntimeException e) {
            started.terminate();
            throw e;
        } catch (InterruptedException e) {
            started.terminate();
            Thread.currentThread().interrupt();
            throw new DBException("interrupted while joining the cluster");
        }
    }

    @Override
    public void cleanup() throws DBException {
        synchronized (LOCK) {
            if (client == null) {
                return;
            }
            client = null;
            if (--users == 0) {
                api.close();
                system.terminate();
                api = null;
                system = null;
            }
        }
    }

    /**
     * The index key of YCSB key {@code key}: its trailing digits as a long.
     *
     * @throws IllegalArgumentException for a key without digits at its end, or whose number does not fit a long
     */
    public static long indexKey(String key) {
        int i = key.length();
        while (i > 0 && Character.isDigit(key.charAt(i - 1))) {
            i--;
        }
        if (i == key.length()) {
            throw new IllegalArgumentException("YCSB key '" + key + "' ends in no number; the index takes 8-byte integer keys");
        }
        try {
            return Long.parseLong(key.substring(i));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("YCSB key '" + key + "': its number does not fit 8 bytes");
        }
    }

    /** A record's one field as the index's value: its length in the top byte, then its bytes. */
    public static long encode(byte[] value) {
        if (value.length > MAX_VALUE_BYTES) {
            throw new IllegalArgumentException("a value of " + value.length + " bytes; the index keeps at most " + MAX_VALUE_BYTES);
        }
        long v = (long) value.length << 56;
        for (int i = 0; i < value.length; i++) {
            v |= (value[i] & 0xFFL) << (48 - 8 * i);
        }
        return v;
    }

    /** The field bytes {@link #encode} kept in {@code v}. */
    public static byte[] decode(long v) {
        int length = (int) (v >>> 56);
        if (length > MAX_VALUE_BYTES) {
            throw new IllegalArgumentException("value " + Long.toHexString(v) + " was not written by the YCSB binding");
        }
        byte[] value = new byte[length];
        for (int i = 0; i < length; i++) {
            value[i] = (byte) (v >>> (48 - 8 * i));
        }
        return value;
    }

    /**
     * Runs an operation of the client API: an input the index cannot take (a key without a number, a value too long)
     * is {@link Status#BAD_REQUEST}, a failure of the cluster (a timeout, a node gone) {@link Status#ERROR}.
     */
    private static Status call(java.util.function.Supplier<Status> operation) {
        try {
            return operation.get();
        } catch (IllegalArgumentException e) {
            return Status.BAD_REQUEST;
        } catch (DexException e) {
            return Status.ERROR;
        }
    }

    @Override
    public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
        return call(() -> {
            OptionalLong value = client.blocking().get(indexKey(key));
            if (value.isEmpty()) {
                return Status.NOT_FOUND;
            }
            if (fields == null || fields.contains(field)) {
                result.put(field, new ByteArrayByteIterator(decode(value.getAsLong())));
            }
            return Status.OK;
        });
    }

    @Override
    public Status scan(String table, String startkey, int recordcount, Set<String> fields,
                       Vector<HashMap<String, ByteIterator>> result) {
        return call(() -> {
            for (DexClientApi.Entry entry : client.blocking().scan(indexKey(startkey), recordcount)) {
                HashMap<String, ByteIterator> record = new HashMap<>();
                if (fields == null || fields.contains(field)) {
                    record.put(field, new ByteArrayByteIterator(decode(entry.value())));
                }
                result.add(record);
            }
            return Status.OK;
        });
    }

    @Override
    public Status update(String table, String key, Map<String, ByteIterator> values) {
        return put(key, values);
    }

    @Override
    public Status insert(String table, String key, Map<String, ByteIterator> values) {
        return put(key, values);
    }

    private Status put(String key, Map<String, ByteIterator> values) {
        if (values.size() != 1 || !values.containsKey(field)) {
            return Status.BAD_REQUEST;
        }
        return call(() -> {
            client.blocking().put(indexKey(key), encode(values.get(field).toArray()));
            return Status.OK;
        });
    }

    @Override
    public Status delete(String table, String key) {
        return call(() -> client.blocking().delete(indexKey(key)) ? Status.OK : Status.NOT_FOUND);
    }
}
