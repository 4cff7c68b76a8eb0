package dev.dex.rdma.tcp;

import io.netty.buffer.ByteBuf;
import org.agrona.concurrent.UnsafeBuffer;

/** Points an Agrona buffer at bytes of a Netty buffer, so regions copy straight into and out of frames. */
final class ByteBufViews {
    private ByteBufViews() {
    }

    /**
     * Wraps {@code view} around {@code buf[index, index + length)}; {@code buf} must have that capacity. A view
     * is valid only while {@code buf} is, and only until it is wrapped again.
     */
    static void wrap(UnsafeBuffer view, ByteBuf buf, int index, int length) {
        if (buf.hasMemoryAddress()) {
            view.wrap(buf.memoryAddress() + index, length);
        } else if (buf.hasArray()) {
            view.wrap(buf.array(), buf.arrayOffset() + index, length);
        } else {
            view.wrap(buf.nioBuffer(index, length));
        }
    }
}
