package dev.dex.core.node;

import static dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.SplittableRandom;
import java.util.TreeMap;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

/**
 * The one definition of what a point operation does to a leaf, checked against a sorted map: random operations on
 * one leaf, deciding with {@link LeafOps#changes}, answering with {@link LeafOps#result} and applying with
 * {@link LeafOps#apply}, leave exactly the map's entries and give the map's answers.
 */
class LeafOpsTest {

    @Test
    void randomOperationsOnALeafAgreeWithASortedMap() {
        NodeView leaf = new NodeView().wrap(new UnsafeBuffer(new byte[NODE_LENGTH]), 0);
        leaf.init(0x1000, 0, 0, 1_000);
        TreeMap<Long, Long> model = new TreeMap<>();
        SplittableRandom random = new SplittableRandom(7);
        int[] ops = {LeafOps.LOOKUP, LeafOps.INSERT, LeafOps.UPDATE, LeafOps.PUT, LeafOps.DELETE};
        for (int i = 0; i < 20_000; i++) {
            int op = ops[random.nextInt(ops.length)];
            long key = 1 + random.nextInt(200);
            long value = random.nextLong();
            int pos = leaf.search(key);
            boolean present = pos >= 0;
            assertEquals(model.containsKey(key), present, "step " + i);
            if (LeafOps.mayAdd(op) && !present && leaf.isFull()) {
                continue; // the engines split first
            }
            boolean expected = switch (op) {
                case LeafOps.LOOKUP -> model.containsKey(key);
                case LeafOps.INSERT -> model.putIfAbsent(key, value) == null;
                case LeafOps.UPDATE -> model.replace(key, value) != null;
                case LeafOps.PUT -> model.put(key, value) != null;
                default -> model.remove(key) != null;
            };
            assertEquals(expected, LeafOps.result(op, present), LeafOps.name(op) + " of " + key + " at step " + i);
            if (LeafOps.changes(op, present)) {
                LeafOps.apply(leaf, pos, op, new long[] {key}, value);
            }
            assertEquals(model.size(), leaf.count(), "step " + i);
        }
        for (int p = 0; p < leaf.count(); p++) {
            assertEquals(model.get(leaf.key(p)), leaf.value(p));
        }
        assertTrue(model.size() > 50, "the leaf was exercised with many keys: " + model.size());
    }

    @Test
    void onlyWritesThatFindWhatTheyNeedChangeALeaf() {
        assertFalse(LeafOps.changes(LeafOps.LOOKUP, true));
        assertFalse(LeafOps.changes(LeafOps.INSERT, true));
        assertTrue(LeafOps.changes(LeafOps.INSERT, false));
        assertFalse(LeafOps.changes(LeafOps.UPDATE, false));
        assertTrue(LeafOps.changes(LeafOps.PUT, true) && LeafOps.changes(LeafOps.PUT, false));
        assertFalse(LeafOps.changes(LeafOps.DELETE, false));
        assertTrue(LeafOps.mayAdd(LeafOps.INSERT) && LeafOps.mayAdd(LeafOps.PUT));
        assertFalse(LeafOps.mayAdd(LeafOps.UPDATE) || LeafOps.mayAdd(LeafOps.DELETE) || LeafOps.mayAdd(LeafOps.LOOKUP));
        assertFalse(LeafOps.isValid(-1) || LeafOps.isValid(5));
    }
}
