package dev.dex.core.offload;

import static dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH;

import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.node.NodeView;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.Region;

/**
 * Runs offloaded operations on one memory server's own region (paper §6): from the start node (level
 * at most M, so its whole subtree is on this server) down to the leaf, then the leaf operation. It never
 * splits: an insert into a full leaf answers {@link OffloadRequest#NEEDS_SPLIT} and the compute side
 * falls back to its caching path.
 *
 * <p>Not thread-safe: one executor per memory-side thread (it owns a node buffer). The compute side
 * guarantees exclusive access to every node of the path during the execute phase (it holds their IO
 * markers, and the nodes are owned, so no other compute node writes them).
 */
public final class SubtreeExecutor {
    private final int serverId;
    private final Region region;
    private final NodeView node = new NodeView().wrap(new UnsafeBuffer(BufferUtil.allocateDirectAligned(NODE_LENGTH, 64)), 0);

    public SubtreeExecutor(int serverId, Region region) {
        this.serverId = serverId;
        this.region = region;
    }

    /** Runs {@code request}'s current phase and fills its outcome (it does not complete it). */
    public void run(OffloadRequest request) {
        long address = request.start;
        int depth = 0;
        boolean execute = request.phase == OffloadRequest.EXECUTE;
        while (true) {
            if (GlobalAddress.isSwizzled(address) || GlobalAddress.serverId(address) != serverId) {
                request.status = OffloadRequest.CROSS_SERVER;
                return;
            }
            region.getBytes(GlobalAddress.offset(address), node.buffer(), 0, NODE_LENGTH);
            if (node.address() != address || !node.covers(request.key)) {
                request.status = OffloadRequest.FENCE_MISMATCH;
                return;
            }
            if (node.lockWord() != 0) {
                request.status = OffloadRequest.STALE;
                return;
            }
            if (execute) {
                if (depth >= request.pathLength || request.path[depth] != address || request.versions[depth] != node.version()) {
                    request.status = OffloadRequest.STALE;
                    return;
                }
            } else {
                if (depth >= request.path.length) {
                    request.status = OffloadRequest.FENCE_MISMATCH;
                    return;
                }
                request.path[depth] = address;
                request.versions[depth] = node.version();
                request.pathLength = depth + 1;
            }
            if (node.isLeaf()) {
                break;
            }
            address = node.child(node.childIndex(request.key));
            depth++;
        }
        if (execute && depth != request.pathLength - 1) {
            request.status = OffloadRequest.STALE;
            return;
        }
        int pos = node.search(request.key);
        boolean present = pos >= 0;
        boolean adds = !present && (request.op == OffloadRequest.INSERT || request.op == OffloadRequest.PUT);
        if (adds && node.isFull()) {
            request.status = OffloadRequest.NEEDS_SPLIT;
            return;
        }
        request.status = OffloadRequest.OK;
        if (!execute) {
            return;
        }
        request.found = present;
        if (present) {
            request.value = node.value(pos);
        }
        boolean changed = switch (request.op) {
            case OffloadRequest.LOOKUP -> false;
            case OffloadRequest.INSERT -> {
                if (!present) {
                    node.insertEntry(-pos - 1, request.key, request.newValue);
                }
                yield !present;
            }
            case OffloadRequest.UPDATE -> {
                if (present) {
                    node.value(pos, request.newValue);
                }
                yield present;
            }
            case OffloadRequest.PUT -> {
                if (present) {
                    node.value(pos, request.newValue);
                } else {
                    node.insertEntry(-pos - 1, request.key, request.newValue);
                }
                yield true;
            }
            case OffloadRequest.DELETE -> {
                if (present) {
                    node.removeEntry(pos);
                }
                yield present;
            }
            default -> throw new IllegalArgumentException("unknown offloaded operation " + request.op);
        };
        if (changed) {
            node.version(node.version() + 1);
            region.putBytes(GlobalAddress.offset(address), node.buffer(), 0, NODE_LENGTH);
        }
    }
}
