package dev.dex.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;

import org.junit.jupiter.api.Test;

/** How the model of acknowledged writes moves with acknowledged and failed writes, and how it spreads its stripes. */
class KeyModelTest {
    private final KeySpace space = new KeySpace(10_000);
    private final KeyModel model = new KeyModel(space);
    private final long loaded = space.loadedKey(7);
    private final long gap = loaded - 5;

    @Test
    void bulkLoadedKeysHoldKeyPlusOneAndOthersAreAbsent() {
        assertTrue(model.allowed(loaded).allows(loaded + 1));
        assertFalse(model.allowed(loaded).absent());
        assertTrue(model.allowed(gap).absent());
        assertEquals(0, model.allowed(gap).values().length);
        assertEquals(0, model.writtenKeys().length);
    }

    @Test
    void aFailedWriteAllowsBothValuesUntilAnAcknowledgedOneSettlesIt() {
        model.failed(loaded, 500);
        KeyModel.Allowed uncertain = model.allowed(loaded);
        assertTrue(uncertain.allows(loaded + 1) && uncertain.allows(500) && !uncertain.absent(), uncertain.toString());
        model.failed(loaded, 600);
        assertTrue(model.allowed(loaded).allows(500) && model.allowed(loaded).allows(600));

        model.acknowledged(Op.UPDATE, loaded, Outcome.FOUND, 700);
        KeyModel.Allowed exact = model.allowed(loaded);
        assertEquals(1, exact.values().length);
        assertTrue(exact.allows(700) && !exact.absent());
        assertEquals(0, model.wrongAnswers());
    }

    @Test
    void aFailedInsertMayHaveAddedTheKeyAndAnInsertThatFindsItSaysItDid() {
        model.failed(gap, gap + 1);
        assertTrue(model.allowed(gap).absent() && model.allowed(gap).allows(gap + 1));
        model.acknowledged(Op.INSERT, gap, Outcome.ALREADY_PRESENT, gap + 1);
        assertFalse(model.allowed(gap).absent(), "it is there");
        assertTrue(model.allowed(gap).allows(gap + 1));
        assertEquals(0, model.wrongAnswers());
    }

    @Test
    void anAnswerTheModelRulesOutIsCountedAndChangesNothing() {
        model.acknowledged(Op.UPDATE, loaded, Outcome.NOT_FOUND, 9);
        assertEquals(1, model.wrongAnswers(), "a bulk-loaded key cannot be missing");
        assertTrue(model.allowed(loaded).allows(loaded + 1) && !model.allowed(loaded).absent());
        model.acknowledged(Op.INSERT, gap, Outcome.ALREADY_PRESENT, gap + 1);
        assertEquals(2, model.wrongAnswers(), "a key never inserted cannot be present");
        model.acknowledged(Op.INSERT, gap, Outcome.INSERTED, gap + 1);
        assertEquals(2, model.wrongAnswers());
        assertTrue(model.allowed(gap).allows(gap + 1) && !model.allowed(gap).absent());
    }

    @Test
    void loadedKeysSpreadOverTheStripes() {
        Set<Object> stripes = Collections.newSetFromMap(new IdentityHashMap<>());
        for (long i = 0; i < 10_000; i++) {
            stripes.add(model.stripe(space.loadedKey(i)));
        }
        // 10,000 keys over 4,096 stripes: about 3,700 stripes taken if the keys spread; 1 if they share low bits.
        assertTrue(stripes.size() > 3_000, stripes.size() + " stripes");
    }
}
