package dev.dex.core.node;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.SplittableRandom;

import org.junit.jupiter.api.Test;

class KeysTest {

    @Test
    void engineKeysOrderByteStringsAsUnsignedBytes() {
        SplittableRandom random = new SplittableRandom(13);
        for (int i = 0; i < 100_000; i++) {
            byte[] a = randomKey(random);
            byte[] b = randomKey(random);
            int bytes = Integer.signum(Keys.compare(a, b));
            int engine = Integer.signum(Long.compare(Keys.engineKey(a), Keys.engineKey(b)));
            assertEquals(bytes, engine, () -> Keys.format(a) + " vs " + Keys.format(b));
        }
        // The bytes a signed comparison would get wrong: 0x80.. is above 0x7f.. and above "z".
        assertTrue(Keys.engineKey(new byte[] {(byte) 0x80}) > Keys.engineKey(new byte[] {0x7f, (byte) 0xff}));
        assertTrue(Keys.engineKey("user:42") < Keys.engineKey("user:5"));
        assertTrue(Keys.engineKey("ab") < Keys.engineKey("ab\u0001"));
    }

    @Test
    void bytesGiveBackTheKeyWithoutTrailingZeros() {
        SplittableRandom random = new SplittableRandom(14);
        for (int i = 0; i < 100_000; i++) {
            byte[] key = randomKey(random);
            int length = key.length;
            while (length > 0 && key[length - 1] == 0) {
                length--;
            }
            assertArrayEquals(Arrays.copyOf(key, length), Keys.bytes(Keys.engineKey(key)));
        }
        assertEquals(Keys.engineKey("ab"), Keys.engineKey("ab\0"), "trailing zero bytes are padding");
        assertEquals("user:42", new String(Keys.bytes(Keys.engineKey("user:42")), StandardCharsets.UTF_8));
    }

    @Test
    void longKeysAreTheirOwnEngineKeysAndKeepTheirOrder() {
        SplittableRandom random = new SplittableRandom(15);
        long[] edges = {Long.MIN_VALUE + 1, -256, -1, 0, 1, 255, 256, Long.MAX_VALUE};
        for (int i = 0; i < 100_000 + edges.length; i++) {
            long a = i < edges.length ? edges[i] : random.nextLong();
            long b = random.nextBoolean() ? edges[random.nextInt(edges.length)] : random.nextLong();
            if (a == Long.MIN_VALUE || b == Long.MIN_VALUE) {
                continue;
            }
            assertEquals(a, Keys.engineKey(Keys.ofLong(a)));
            assertEquals(Integer.signum(Long.compare(a, b)), Integer.signum(Arrays.compareUnsigned(Keys.ofLong(a), Keys.ofLong(b))));
        }
        assertArrayEquals(new byte[] {(byte) 0x80, 0, 0, 0, 0, 0, 0, 1}, Keys.ofLong(1));
    }

    @Test
    void wrongKeysAreClearErrors() {
        IllegalArgumentException wide = assertThrows(IllegalArgumentException.class, () -> Keys.engineKey("user:1234"));
        assertEquals("key user:1234 is 9 bytes; this index's keys are at most 8 bytes", wide.getMessage());
        assertThrows(IllegalArgumentException.class, () -> Keys.engineKey(new byte[0]));
        assertThrows(IllegalArgumentException.class, () -> Keys.engineKey(new byte[] {0, 0}));
        assertThrows(IllegalArgumentException.class, () -> Keys.parse("0x1"));
        assertThrows(IllegalArgumentException.class, () -> Keys.parse("0xzz"));
    }

    @Test
    void parseAndFormatAreInverse() {
        for (String text : new String[] {"user:42", "\u00e9t\u00e9", "0x00ff", "0x", "a b"}) {
            byte[] key = Keys.parse(text.equals("0x") ? "\\0x" : text);
            assertEquals(text.equals("0x") ? "0x3078" : text, Keys.format(key));
            assertArrayEquals(key, Keys.parse(Keys.format(key)));
        }
        assertArrayEquals(new byte[] {0, (byte) 0xff}, Keys.parse("0x00ff"));
        assertArrayEquals(new byte[0], Keys.parse("0x"));
        assertEquals("0x", Keys.format(new byte[0]));
        assertEquals("0x0a", Keys.format(new byte[] {'\n'}));
    }

    private static byte[] randomKey(SplittableRandom random) {
        byte[] key = new byte[1 + random.nextInt(8)];
        for (int i = 0; i < key.length; i++) {
            // Few distinct byte values, so that common prefixes and equal keys are frequent.
            key[i] = (byte) new int[] {0, 1, 0x41, 0x7f, 0x80, 0xff}[random.nextInt(6)];
        }
        if (key[0] == 0) {
            key[0] = 1;
        }
        return key;
    }
}
