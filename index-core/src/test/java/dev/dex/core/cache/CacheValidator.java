package dev.dex.core.cache;

import static dev.dex.core.cache.FrameHeaderDescriptor.COOLING;
import static dev.dex.core.cache.FrameHeaderDescriptor.DIRTY;
import static dev.dex.core.cache.FrameHeaderDescriptor.FREE;
import static dev.dex.core.cache.FrameHeaderDescriptor.HOT;
import static dev.dex.core.cache.FrameHeaderDescriptor.NO_FRAME;
import static dev.dex.core.cache.FrameHeaderDescriptor.SHARED;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import dev.dex.core.node.NodeView;
import dev.dex.rdma.GlobalAddress;

/**
 * Checks the invariants of a quiescent {@link DexEngine}'s cache (no operation in flight):
 *
 * <ul>
 *   <li>no frame is locked and no IO marker is left in the mapping table;</li>
 *   <li>the mapping table and the frames agree: every entry names a HOT or COOLING frame caching that
 *       address, and every HOT or COOLING frame has its entry;</li>
 *   <li>no frame is both free (on a free list) and mapped, and no frame is on two free lists;</li>
 *   <li>every swizzled pointer leads to a HOT frame whose parent is the frame holding the pointer, and
 *       each HOT frame with a parent is swizzled there exactly once;</li>
 *   <li>COOLING frames have no swizzled children, are in the cooling map exactly once, and the cooling
 *       map holds only COOLING frames;</li>
 *   <li>the dirty count adds up; no shared node is dirty; cached leaves are owned (shared leaves are
 *       never cached); the SHARED flag matches the node's fences;</li>
 *   <li>a frame's owner hint names its node's partition or says it spanned several when admitted, and a free
 *       frame has none;</li>
 *   <li>the root frame, if any, is HOT, pinned, and caches the engine's root address.</li>
 * </ul>
 */
public final class CacheValidator {
    private static final int MAX_PROBLEMS = 20;

    private final DexEngine engine;
    private final FrameArena arena;
    private final List<String> problems = new ArrayList<>();

    private CacheValidator(DexEngine engine) {
        this.engine = engine;
        this.arena = engine.arena;
    }

    /** Validates; throws {@link IllegalStateException} listing the first problems. */
    public static void validate(DexEngine engine) {
        CacheValidator validator = new CacheValidator(engine);
        validator.run();
        if (!validator.problems.isEmpty()) {
            throw new IllegalStateException("cache invariants violated:\n  " + String.join("\n  ", validator.problems));
        }
    }

    private void run() {
        int frames = arena.frames();
        Set<Integer> mapped = new HashSet<>();
        engine.mapping.forEach((address, value) -> {
            if (value == MappingTable.IO) {
                problem("IO marker left for " + GlobalAddress.toString(address));
                return;
            }
            int f = (int) value;
            if (f < 0 || f >= frames) {
                problem("mapping " + GlobalAddress.toString(address) + " -> frame " + value + " out of range");
                return;
            }
            int state = arena.state(f);
            if (state != HOT && state != COOLING) {
                problem("mapping " + GlobalAddress.toString(address) + " -> frame " + f + " in state " + state);
            }
            if (arena.address(f) != address) {
                problem("mapping " + GlobalAddress.toString(address) + " -> frame " + f + " that caches "
                        + GlobalAddress.toString(arena.address(f)));
            }
            mapped.add(f);
        });

        Set<Integer> free = new HashSet<>();
        List<Integer> freeLists = new ArrayList<>(engine.freeListSnapshot());
        for (DexSession session : engine.sessions) {
            session.frames().free().forEachOrderedInt(freeLists::add);
        }
        for (int f : freeLists) {
            if (!free.add(f)) {
                problem("frame " + f + " is on two free lists");
            }
            if (mapped.contains(f)) {
                problem("frame " + f + " is both free and mapped");
            }
            if (arena.state(f) != FREE) {
                problem("frame " + f + " is on a free list in state " + arena.state(f));
            }
        }

        Set<Integer> inCoolingMap = new HashSet<>();
        CoolingMap cooling = engine.cooling;
        int coolingEntries = 0;
        for (int b = 0; b < cooling.buckets(); b++) {
            for (int i = 0; i < cooling.count(b); i++) {
                int f = cooling.slot(b, i);
                coolingEntries++;
                if (!inCoolingMap.add(f)) {
                    problem("frame " + f + " is in the cooling map twice");
                }
                if (arena.state(f) != COOLING) {
                    problem("cooling map holds frame " + f + " in state " + arena.state(f));
                }
                if (cooling.bucketOf(arena.address(f)) != b) {
                    problem("frame " + f + " is in cooling bucket " + b + " but hashes elsewhere");
                }
            }
        }
        if (coolingEntries != cooling.size()) {
            problem("cooling map size " + cooling.size() + " but " + coolingEntries + " entries");
        }

        long dirty = 0;
        int[] swizzledIn = new int[frames];
        NodeView view = new NodeView(engine.keys);
        for (int f = 0; f < frames; f++) {
            if (arena.isLocked(f)) {
                problem("frame " + f + " is left locked");
            }
            int state = arena.state(f);
            if (state == FREE) {
                if (arena.flag(f, DIRTY)) {
                    problem("free frame " + f + " is dirty");
                }
                if (arena.ownerHint(f) != FrameArena.NO_OWNER) {
                    problem("free frame " + f + " has the owner hint " + arena.ownerHint(f));
                }
                continue;
            }
            if (!mapped.contains(f)) {
                problem("frame " + f + " (state " + state + ") caching " + GlobalAddress.toString(arena.address(f)) + " is not mapped");
            }
            if (state == COOLING && !inCoolingMap.contains(f)) {
                problem("cooling frame " + f + " is not in the cooling map");
            }
            NodeView node = arena.wrap(view, f);
            if (node.address() != arena.address(f)) {
                problem("frame " + f + " header says " + GlobalAddress.toString(arena.address(f)) + " but its image is "
                        + GlobalAddress.toString(node.address()));
            }
            // A release skips a frame by its hint: a node hinted with a partition lies in it or spans partitions (a
            // clipped copy refreshed wider), never in another partition; a cached leaf lies in one partition.
            int hint = arena.ownerHint(f);
            int owner = engine.partitions.ownerOf(node);
            if (hint != FrameArena.SPANS && owner != FrameArena.SPANS && hint != owner) {
                problem("frame " + f + " has the owner hint " + hint + " but its node lies in partition " + owner + ": " + node);
            }
            if (node.isLeaf() && hint == FrameArena.SPANS) {
                problem("cached leaf in frame " + f + " is hinted as spanning partitions: " + node);
            }
            // Owned here only if inside one partition that this engine holds (a node of another compute
            // node's partition is a read-only, possibly stale copy, treated as shared).
            boolean shared = engine.treatAsShared(node);
            if (shared != arena.flag(f, SHARED)) {
                problem("frame " + f + " SHARED flag " + arena.flag(f, SHARED) + " but fences and held partitions say "
                        + shared + ": " + node);
            }
            if (arena.flag(f, DIRTY)) {
                dirty++;
                if (shared) {
                    problem("shared frame " + f + " is dirty");
                }
            }
            if (node.isLeaf() && shared) {
                problem("shared leaf cached in frame " + f + ": " + node);
            }
            if (!node.isLeaf()) {
                for (int i = 0; i <= node.count(); i++) {
                    long pointer = node.child(i);
                    if (!GlobalAddress.isSwizzled(pointer)) {
                        continue;
                    }
                    int child = (int) GlobalAddress.unswizzle(pointer);
                    if (state == COOLING) {
                        problem("cooling frame " + f + " has a swizzled child " + child);
                    }
                    if (child < 0 || child >= frames) {
                        problem("frame " + f + " slot " + i + " swizzles frame " + child + " out of range");
                        continue;
                    }
                    swizzledIn[child]++;
                    if (arena.state(child) != HOT) {
                        problem("frame " + f + " slot " + i + " swizzles frame " + child + " in state " + arena.state(child));
                    }
                    if (arena.parent(child) != f) {
                        problem("frame " + f + " slot " + i + " swizzles frame " + child + " whose parent is " + arena.parent(child));
                    }
                }
            }
        }
        for (int f = 0; f < frames; f++) {
            if (arena.state(f) == HOT && arena.parent(f) != NO_FRAME && swizzledIn[f] != 1) {
                problem("frame " + f + " has parent " + arena.parent(f) + " but is swizzled " + swizzledIn[f] + " times");
            }
            if (swizzledIn[f] > 1) {
                problem("frame " + f + " is swizzled " + swizzledIn[f] + " times");
            }
        }
        if (dirty != engine.dirtyFrames.get()) {
            problem("dirty count " + engine.dirtyFrames.get() + " but " + dirty + " dirty frames");
        }
        int root = engine.rootFrame.get();
        if (root != NO_FRAME) {
            if (arena.state(root) != HOT || arena.pins(root) < 1 || arena.address(root) != engine.rootAddress.get()) {
                problem("root frame " + root + " state " + arena.state(root) + " pins " + arena.pins(root)
                        + " caches " + GlobalAddress.toString(arena.address(root)) + ", root is "
                        + GlobalAddress.toString(engine.rootAddress.get()));
            }
        }
        for (int f = 0; f < frames; f++) {
            int expectedPins = f == root ? 1 : 0;
            if (arena.pins(f) != expectedPins) {
                problem("frame " + f + " has " + arena.pins(f) + " pins, expected " + expectedPins);
            }
        }
        validateExclusion(root);
    }

    /**
     * What one-message offloaded writes rely on ({@link OffloadExclusion}): at rest no write is in flight and no
     * descent's escape is left; only cached frames are escapes; and every hot frame below the offloading level that
     * has no cached parent (but the root's) or a shared one is an escape.
     */
    private void validateExclusion(int root) {
        OffloadExclusion exclusion = engine.exclusion;
        if (exclusion.writes() != 0) {
            problem(exclusion.writes() + " offloaded writes left in flight: " + exclusion);
        }
        if (exclusion.escapeWithoutBit() >= 0) {
            problem("frame " + exclusion.escapeWithoutBit() + " is an escape that writes cannot find (its bit is clear)");
        }
        int frameEscapes = 0;
        NodeView view = new NodeView(engine.keys);
        for (int f = 0; f < arena.frames(); f++) {
            int state = arena.state(f);
            if (exclusion.isEscape(f)) {
                frameEscapes++;
                if (state == FREE) {
                    problem("free frame " + f + " is still an escape");
                }
            }
            if (state != HOT || f == root) {
                continue;
            }
            NodeView node = arena.wrap(view, f);
            int parent = arena.parent(f);
            boolean escapes = parent == NO_FRAME || arena.flag(parent, SHARED);
            if (escapes && exclusion.matters(node.level()) && !exclusion.isEscape(f)) {
                problem("hot frame " + f + " at level " + node.level() + " has " + (parent == NO_FRAME ? "no parent"
                        : "shared parent " + parent) + " but is not an escape: " + node);
            }
        }
        if (frameEscapes != exclusion.escapes()) {
            problem((exclusion.escapes() - frameEscapes) + " escapes of descents left: " + exclusion);
        }
    }

    private void problem(String text) {
        if (problems.size() < MAX_PROBLEMS) {
            problems.add(text);
        }
    }
}
