package dev.dex.rdma.replica;

import java.util.List;
import java.util.Objects;

/**
 * A memory server's replicas in one view of its group, by the endpoints of their regions: what a compute node learns
 * from the cluster's group map before it connects ({@link ReplicaSet} is the connected form).
 *
 * @param view    the group's view
 * @param primary the primary's endpoint
 * @param backups the backups' endpoints
 */
public record ReplicaEndpoints(long view, String primary, List<String> backups) {
    public ReplicaEndpoints {
        Objects.requireNonNull(primary, "primary");
        backups = List.copyOf(backups);
    }
}
