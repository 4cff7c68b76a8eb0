package dev.dex.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ObjectNode;

import dev.dex.rdma.VerbSnapshot;

/**
 * A {@link BenchResult} as one JSON object:
 * {@code {"workload","mode","fabric","dist","theta","keys","keyBytes","ops","threads","computeNodes","cacheRatio","cacheBytes",
 * "throughputOpsPerSec","perOp":{"reads","writes","atomics","twoSided","bytes"},"cacheHitRatio",
 * "leafAdmission","leafAdmissionAuto",
 * "latencyNs":{"p50","p99","p999"}}}. {@code cacheHitRatio} is null for engines without a cache; {@code theta}
 * is 0 for the uniform distribution (Zipf with theta 0); per-op values are verbs over measured operations.
 */
final class ResultJson {
    private static final ObjectMapper MAPPER = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    private ResultJson() {
    }

    static ObjectNode toJson(BenchResult r) {
        BenchSettings c = r.config();
        ObjectNode root = MAPPER.createObjectNode();
        root.put("workload", c.workload().cliName());
        root.put("mode", c.mode().cliName());
        root.put("fabric", c.fabric());
        root.put("replicas", c.replicas());
        root.put("dist", c.distribution().cliName());
        root.put("theta", c.distribution() == Distribution.ZIPF ? c.theta() : 0.0);
        root.put("keys", c.keys());
        root.put("keyBytes", c.keyBytes());
        root.put("ops", c.ops());
        root.put("threads", c.threads());
        root.put("computeNodes", c.computeNodes());
        root.put("cacheRatio", r.cacheRatio());
        root.put("cacheBytes", r.cacheBytes());
        root.put("throughputOpsPerSec", r.throughputOpsPerSec());
        VerbSnapshot v = r.verbs();
        ObjectNode perOp = root.putObject("perOp");
        perOp.put("reads", r.perOp(v.reads()));
        perOp.put("writes", r.perOp(v.writes()));
        perOp.put("atomics", r.perOp(v.atomics()));
        perOp.put("twoSided", r.perOp(v.twoSided()));
        perOp.put("bytes", r.perOp(v.bytes()));
        if (Double.isNaN(r.cacheHitRatio())) {
            root.putNull("cacheHitRatio");
        } else {
            root.put("cacheHitRatio", r.cacheHitRatio());
        }
        if (Double.isNaN(r.leafAdmission())) {
            root.putNull("leafAdmission");
        } else {
            root.put("leafAdmission", r.leafAdmission());
        }
        root.put("leafAdmissionAuto", r.config().tunesLeafAdmission());
        ObjectNode latency = root.putObject("latencyNs");
        latency.put("p50", r.p50Nanos());
        latency.put("p99", r.p99Nanos());
        latency.put("p999", r.p999Nanos());
        return root;
    }

    static void write(BenchResult r, Path file) throws IOException {
        write(r, null, file);
    }

    /** As {@link #write(BenchResult, Path)}, with a delete-heavy run's report (or null). */
    static void write(BenchResult r, DeleteHeavyReport deletes, Path file) throws IOException {
        ObjectNode root = toJson(r);
        if (deletes != null) {
            deletes.addTo(root);
        }
        Files.writeString(file, MAPPER.writeValueAsString(root) + System.lineSeparator());
    }
}
