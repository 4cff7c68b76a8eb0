package dev.dex.core.cache;

/**
 * Layout of a cache frame: a 64-byte header followed by the 1 KiB node image (native byte order for the
 * header words, which are only ever accessed by this process).
 *
 * <pre>
 *   0                8        12       16               24               32       36       64
 *  +----------------+--------+--------+----------------+----------------+--------+--------+------------------+
 *  | version lock   | state  | flags  | global address | parent frame   | pins   | unused | node image 1 KiB |
 *  +----------------+--------+--------+----------------+----------------+--------+--------+------------------+
 * </pre>
 *
 * <ul>
 *   <li><b>version lock</b>: the local optimistic lock. Bit 0 set = write-locked; every unlock adds 2
 *       to the version, so the word never decreases and never repeats.</li>
 *   <li><b>state</b>: {@link #FREE}, {@link #HOT} or {@link #COOLING}.</li>
 *   <li><b>flags</b>: {@link #DIRTY} (the image is newer than remote memory), {@link #SHARED} (the node's
 *       fence range spans several partitions).</li>
 *   <li><b>global address</b>: the node this frame caches.</li>
 *   <li><b>parent frame</b>: the frame whose image holds the swizzled pointer to this one, or
 *       {@link #NO_FRAME} when none does.</li>
 *   <li><b>pins</b>: a pinned frame is never cooled (the root; a parent during an offload).</li>
 * </ul>
 */
public final class FrameHeaderDescriptor {
    public static final int VERSION_LOCK_OFFSET = 0;
    public static final int STATE_OFFSET = VERSION_LOCK_OFFSET + Long.BYTES;
    public static final int FLAGS_OFFSET = STATE_OFFSET + Integer.BYTES;
    public static final int ADDRESS_OFFSET = FLAGS_OFFSET + Integer.BYTES;
    public static final int PARENT_OFFSET = ADDRESS_OFFSET + Long.BYTES;
    public static final int PINS_OFFSET = PARENT_OFFSET + Long.BYTES;
    public static final int HEADER_LENGTH = 64;
    public static final int IMAGE_OFFSET = HEADER_LENGTH;
    public static final int FRAME_LENGTH = HEADER_LENGTH + dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH;

    public static final long LOCKED = 1L;

    public static final int FREE = 0;
    public static final int HOT = 1;
    public static final int COOLING = 2;

    public static final int DIRTY = 1;
    public static final int SHARED = 2;

    public static final int NO_FRAME = -1;

    private FrameHeaderDescriptor() {
    }
}
