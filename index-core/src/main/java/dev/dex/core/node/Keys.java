package dev.dex.core.node;

import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HexFormat;

/**
 * Keys as byte strings: how {@code byte[]}, {@code String} and {@code long} keys become the index's keys and back,
 * and how people type and read them.
 *
 * <p>The index orders keys as unsigned bytes (memcmp order), padded with zero bytes to the key width the index
 * was formatted with; {@link KeyFormat} turns a byte string into the engine's words for any width and is the
 * one place that checks a key. The methods with a {@code long} engine key here are those of 8-byte keys, the
 * width whose engine key is one word: its eight bytes read big-endian with the sign bit flipped, so that
 * comparing the longs as signed numbers compares the bytes as unsigned ones. A {@code long} key is the same
 * long: {@link #ofLong} gives the bytes whose engine key is that long, so an index may be used with longs, with
 * byte strings, or both, and the two orders agree.
 *
 * <p>Two consequences of the padding: trailing zero bytes are not part of a key ({@code "ab"} and
 * {@code "ab\0"} are the same key; {@link #bytes} returns the key without them), and the empty key (all zero
 * bytes, the long {@link Long#MIN_VALUE}) is reserved. A key longer than the width is refused with
 * {@link IllegalArgumentException}, never cut.
 *
 * <p>Stateless; thread-safe.
 */
public final class Keys {
    private static final HexFormat HEX = HexFormat.of();

    private Keys() {
    }

    /**
     * The engine key of the byte string {@code key} in an index of 8-byte keys.
     *
     * @throws IllegalArgumentException as {@link KeyFormat#toWords} does: longer than 8 bytes, or empty
     */
    public static long engineKey(byte[] key) {
        long[] word = new long[1];
        KeyFormat.EIGHT.toWords(key, word);
        return word[0];
    }

    /** The engine key of the UTF-8 bytes of {@code key}. */
    public static long engineKey(String key) {
        return engineKey(key.getBytes(StandardCharsets.UTF_8));
    }

    /** The byte string of an 8-byte key's engine key, without trailing zero bytes. */
    public static byte[] bytes(long engineKey) {
        return KeyFormat.EIGHT.toBytes(new long[] {engineKey}, 0);
    }

    /** The eight bytes whose engine key is {@code key}: big-endian, sign bit flipped. */
    public static byte[] ofLong(long key) {
        byte[] bytes = new byte[Long.BYTES];
        long word = key ^ Long.MIN_VALUE;
        for (int i = 0; i < Long.BYTES; i++) {
            bytes[i] = (byte) (word >>> (8 * (Long.BYTES - 1 - i)));
        }
        return bytes;
    }

    /** Compares byte-string keys as the index does: unsigned bytes, trailing zero bytes ignored. */
    public static int compare(byte[] a, byte[] b) {
        return Arrays.compareUnsigned(a, 0, significant(a), b, 0, significant(b));
    }

    /** Whether {@code key} is the empty key (no bytes, or only zero bytes): below every key, where a scan starts first. */
    public static boolean isEmpty(byte[] key) {
        return significant(key) == 0;
    }

    /**
     * Reads a key typed by a person: {@code 0x} followed by hex digits is those bytes ({@code 0x} alone the empty
     * key), anything else its UTF-8 bytes (text that starts with {@code 0x} is written {@code \0x...}).
     */
    public static byte[] parse(String text) {
        if (text.startsWith("\\0x")) {
            return text.substring(1).getBytes(StandardCharsets.UTF_8);
        }
        if (text.startsWith("0x")) {
            String digits = text.substring(2);
            if (digits.length() % 2 != 0) {
                throw new IllegalArgumentException("'" + text + "' is not a hex key: 0x needs an even number of hex digits");
            }
            try {
                return HEX.parseHex(digits);
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("'" + text + "' is not a hex key: " + e.getMessage());
            }
        }
        return text.getBytes(StandardCharsets.UTF_8);
    }

    /**
     * A key for people to read, the inverse of {@link #parse}: its text when it is UTF-8 without control characters
     * (and does not itself start with {@code 0x}), else {@code 0x} and its bytes in hex.
     */
    public static String format(byte[] key) {
        byte[] bytes = Arrays.copyOf(key, significant(key));
        try {
            String text = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(java.nio.ByteBuffer.wrap(bytes)).toString();
            if (!text.isEmpty() && text.codePoints().noneMatch(Character::isISOControl) && !text.startsWith("0x")
                    && !text.startsWith("\\0x")) {
                return text;
            }
        } catch (CharacterCodingException e) {
            // not text: hex below
        }
        return "0x" + HEX.formatHex(bytes);
    }

    private static int significant(byte[] key) {
        int length = key.length;
        while (length > 0 && key[length - 1] == 0) {
            length--;
        }
        return length;
    }
}
