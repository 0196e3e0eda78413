package com.example;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The documentation shows MyConsumerTest as it is (its imports and its class). */
class ReadmeTest {

  @ParameterizedTest
  @ValueSource(strings = {"../../docs/java.md"})
  void theExampleIsMyConsumerTest(String readme) throws IOException {
    String source = Files.readString(Path.of("src/test/java/com/example/MyConsumerTest.java"));
    String imports = source.substring(source.indexOf("import static"), source.indexOf("// The example of"));
    String body = source.substring(source.indexOf("@MockDcp(vbuckets"));
    String text = Files.readString(Path.of(readme));
    int start = text.indexOf("```java\nimport static") + "```java\n".length();
    String block = text.substring(start, text.indexOf("```", start));
    assertEquals(imports.strip() + "\n\n" + body.strip(), block.strip());
  }
}
