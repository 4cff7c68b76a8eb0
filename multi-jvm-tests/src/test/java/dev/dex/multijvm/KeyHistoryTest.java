package dev.dex.multijvm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class KeyHistoryTest {

    @Test
    void aReadMayReturnTheValueAcknowledgedWhenItBeganOrOneSentSince() {
        KeyHistory history = new KeyHistory(100);
        history.acknowledge(history.send(200));
        int readBegins = history.acknowledged();
        int third = history.send(300);

        assertTrue(history.readable(readBegins, 200));
        assertTrue(history.readable(readBegins, 300), "a write in flight may already be visible");
        assertFalse(history.readable(readBegins, 100), "older than what was acknowledged when the read began");
        assertFalse(history.readable(readBegins, 999), "never written");

        history.acknowledge(third);
        assertEquals(300, history.lastAcknowledged());
    }

    @Test
    void onceAcknowledgedCoversTheLoadedValueAndAcknowledgedWritesOnly() {
        KeyHistory history = new KeyHistory(100);
        history.acknowledge(history.send(200));
        history.send(300);

        assertTrue(history.onceAcknowledged(100));
        assertTrue(history.onceAcknowledged(200));
        assertFalse(history.onceAcknowledged(300), "sent but not acknowledged");
        assertTrue(history.everSent(300));
        assertFalse(history.everSent(400));
    }
}
