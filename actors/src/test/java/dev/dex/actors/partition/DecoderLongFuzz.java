package dev.dex.actors.partition;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;

/**
 * {@link DecoderFuzzTest}'s decoders for 30 minutes, run by hand (its name keeps it out of {@code mvn verify}):
 * {@code JAZZER_FUZZ=1 mvn -pl actors test -Dtest=DecoderLongFuzz -Dsurefire.failIfNoSpecifiedTests=false}.
 */
class DecoderLongFuzz {
    @FuzzTest(maxDuration = "30m")
    void decoders(FuzzedDataProvider data) {
        DecoderFuzzTest.fuzzOne(data);
    }
}
