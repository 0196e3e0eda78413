package mockdcp.interop;

import com.couchbase.client.core.deps.io.netty.buffer.ByteBuf;
import com.couchbase.client.dcp.CertificateAuthenticator;
import com.couchbase.client.dcp.Client;
import com.couchbase.client.dcp.StreamFrom;
import com.couchbase.client.dcp.StreamTo;
import com.couchbase.client.dcp.config.CompressionMode;
import com.couchbase.client.dcp.config.DcpControl;
import com.couchbase.client.dcp.core.event.CouchbaseEvent;
import com.couchbase.client.dcp.events.DcpFailureEvent;
import com.couchbase.client.dcp.events.StreamEndEvent;
import com.couchbase.client.dcp.highlevel.CollectionCreated;
import com.couchbase.client.dcp.highlevel.CollectionDropped;
import com.couchbase.client.dcp.highlevel.CollectionFlushed;
import com.couchbase.client.dcp.highlevel.ScopeCreated;
import com.couchbase.client.dcp.highlevel.ScopeDropped;
import com.couchbase.client.dcp.highlevel.SnapshotMarker;
import com.couchbase.client.dcp.highlevel.StreamOffset;
import com.couchbase.client.dcp.highlevel.internal.CollectionIdAndKey;
import com.couchbase.client.dcp.message.ContentAndXattrs;
import com.couchbase.client.dcp.message.DcpDeletionMessage;
import com.couchbase.client.dcp.message.DcpExpirationMessage;
import com.couchbase.client.dcp.message.DcpMutationMessage;
import com.couchbase.client.dcp.message.DcpSeqnoAdvancedRequest;
import com.couchbase.client.dcp.message.DcpSnapshotMarkerRequest;
import com.couchbase.client.dcp.message.DcpSystemEvent;
import com.couchbase.client.dcp.message.DcpSystemEventRequest;
import com.couchbase.client.dcp.message.MessageUtil;
import com.couchbase.client.dcp.message.RollbackMessage;
import com.couchbase.client.dcp.state.FailoverLogEntry;
import com.couchbase.client.dcp.state.PartitionState;
import com.couchbase.client.dcp.transport.netty.ChannelFlowController;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.concurrent.TimeUnit;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;

/**
 * Test consumer for mockdcp built on java-dcp-client's low-level API.
 * <p>
 * Writes one JSON object per received event to --out (flushed per line), keeps a consumer-side
 * copy of the documents (every version, trimmed on rollback) and writes it to --state when stdin
 * reaches EOF or on SIGTERM. Logs go to stderr; stdout is unused.
 */
public final class MockdcpConsumer {

  private static final String USAGE = String.join("\n",
      "usage: java -jar mockdcp-interop-java.jar --host H --kv-port N --user U --password P",
      "           --bucket B --out EVENTS.jsonl --state STATE.json [options]",
      "",
      "Streams a bucket with java-dcp-client (low-level API) until stdin reaches EOF or SIGTERM,",
      "then writes STATE.json, disconnects and exits 0. Fatal errors: message on stderr, exit 1.",
      "",
      "required:",
      "  --host HOST                   seed host (e.g. 127.0.0.1)",
      "  --kv-port N                   KV (memcached binary) port of the seed",
      "  --user U --password P         credentials (SCRAM; the library never uses PLAIN without TLS)",
      "  --bucket B                    bucket name",
      "  --out FILE                    events, one JSON object per line",
      "  --state FILE                  final consumer state (JSON)",
      "options:",
      "  --collections                 collectionsAware(true)",
      "  --collection SCOPE.COLL       stream only this collection (repeatable; implies --collections)",
      "  --scope SCOPE                 stream only this scope: scopeName(SCOPE) (implies --collections;",
      "                                not with --collection)",
      "  --flow-control BYTES          connection buffer size, 0 = off (default 0); events are acked",
      "  --vbuckets all|0,1,5          vbuckets to stream (default all)",
      "  --resume-from STATE.json      resume from the vbucket positions and documents of a state file",
      "  --xattrs                      request XATTRs (events get an \"xattrs\" object)",
      "  --no-value                    request keys and metadata only",
      "  --expiry-opcode               ask for DCP_EXPIRATION (optional control enable_expiry_opcode=true;",
      "                                a server refusing it with EINVAL/NOT_SUPPORTED is tolerated)",
      "  --connect-timeout-seconds N   give up connecting after N seconds (default 15)",
      "  --log-level LEVEL             trace|debug|info|warn|error|off (default info)",
      "  --tls-ca FILE                 TLS (couchbases://): --kv-port is the TLS port; the node's",
      "                                certificate must chain to this CA (PEM), hostname verified",
      "  --client-keystore FILE        authenticate with the client certificate in this PKCS#12",
      "                                key store (CertificateAuthenticator; needs --tls-ca; no SASL)",
      "  --client-keystore-password P  its password",
      "  --noop-interval SECONDS       DCP_CONTROL set_noop_interval (the library enables noops, 120 s)",
      "  --output FILE                 keep the live documents in FILE as JSON lines (scope, collection,",
      "                                key, value, seqno, rev, cas, vbucket: what `mockdcp check` verifies);",
      "                                rewritten when they change and on stop; --out/--state then optional",
      "  --progress FILE               with --output: after each write of it, how far it goes (per vbucket",
      "                                the failover-log uuid and the seqno held: `mockdcp check`'s",
      "                                MOCKDCP_PROGRESS), so that check takes a matching output at once",
      "  --env                         take what is not given from `mockdcp check`/`run`'s variables:",
      "                                MOCKDCP_HOST, _KV_PORT, _USER, _PASSWORD, _BUCKET, _OUTPUT, _PROGRESS,",
      "                                _BUFFER_SIZE (--flow-control), _NOOP_INTERVAL (--noop-interval);",
      "                                stdin is then ignored (stop with SIGTERM, as check and run do)",
      "  --help                        this text",
      "",
      "--delete-times is not offered: dcp-client 0.56.0 has no builder option for",
      "INCLUDE_DELETE_TIMES.");

  private static final ObjectMapper JSON = new ObjectMapper();

  // ------------------------------------------------------------------ options

  static final class Options {
    String tlsCa;
    String clientKeystore;
    String clientKeystorePassword = "";
    String host;
    int kvPort = -1;
    String user;
    String password;
    String bucket;
    String out;
    String state;
    boolean collections;
    final List<String> collectionNames = new ArrayList<>();
    String scope;
    int flowControl;
    List<Integer> vbuckets; // null = all
    String resumeFrom;
    boolean xattrs;
    boolean noValue;
    boolean expiryOpcode;
    int connectTimeoutSeconds = 15;
    String logLevel = "info";
    /** null, or the connector whose java-dcp-client settings to use (kafka, elasticsearch). */
    String profile;
    /** null, or where the live documents go as JSON lines (mockdcp check's MOCKDCP_OUTPUT). */
    String output;
    /** null, or where to say how far --output goes (mockdcp check's MOCKDCP_PROGRESS). */
    String progress;
    /** 0, or the noop interval to set (seconds). */
    int noopInterval;
    boolean env;
  }

  static final class UsageException extends Exception {
    UsageException(String message) {
      super(message);
    }
  }

  static Options parseArgs(String[] args) throws UsageException {
    Options o = new Options();
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      String inlineValue = null;
      int eq = a.indexOf('=');
      if (a.startsWith("--") && eq > 0) {
        inlineValue = a.substring(eq + 1);
        a = a.substring(0, eq);
      }
      switch (a) {
        case "--collections":
          o.collections = true;
          continue;
        case "--xattrs":
          o.xattrs = true;
          continue;
        case "--no-value":
          o.noValue = true;
          continue;
        case "--expiry-opcode":
          o.expiryOpcode = true;
          continue;
        case "--env":
          o.env = true;
          continue;
        default:
          break;
      }
      String v;
      if (inlineValue != null) {
        v = inlineValue;
      } else {
        if (i + 1 >= args.length) {
          throw new UsageException("missing value for " + a);
        }
        v = args[++i];
      }
      switch (a) {
        case "--host": o.host = v; break;
        case "--kv-port": o.kvPort = parseInt(a, v, 1, 65535); break;
        case "--user": o.user = v; break;
        case "--password": o.password = v; break;
        case "--bucket": o.bucket = v; break;
        case "--out": o.out = v; break;
        case "--state": o.state = v; break;
        case "--collection":
          if (!v.contains(".")) {
            throw new UsageException("--collection wants SCOPE.COLLECTION, got " + v);
          }
          o.collectionNames.add(v);
          o.collections = true;
          break;
        case "--scope":
          o.scope = v;
          o.collections = true;
          break;
        case "--flow-control": o.flowControl = parseInt(a, v, 0, Integer.MAX_VALUE); break;
        case "--vbuckets": o.vbuckets = parseVbuckets(v); break;
        case "--resume-from": o.resumeFrom = v; break;
        case "--connect-timeout-seconds": o.connectTimeoutSeconds = parseInt(a, v, 1, 3600); break;
        case "--log-level": o.logLevel = v.toLowerCase(Locale.ROOT); break;
        case "--tls-ca": o.tlsCa = v; break;
        case "--client-keystore": o.clientKeystore = v; break;
        case "--client-keystore-password": o.clientKeystorePassword = v; break;
        case "--output": o.output = v; break;
        case "--progress": o.progress = v; break;
        case "--noop-interval": o.noopInterval = parseInt(a, v, 1, 3600); break;
        case "--profile":
          if (!List.of("kafka", "elasticsearch").contains(v)) {
            throw new UsageException("--profile wants kafka or elasticsearch, got " + v);
          }
          o.profile = v;
          o.collections = true; // both connectors are collections aware
          break;
        default:
          throw new UsageException("unknown option " + a);
      }
    }
    if (o.env) {
      fromEnvironment(o);
    }
    String[][] required = o.output != null
        ? new String[][]{{"--host", o.host}, {"--user", o.user}, {"--password", o.password},
            {"--bucket", o.bucket}}
        : new String[][]{{"--host", o.host}, {"--user", o.user}, {"--password", o.password},
            {"--bucket", o.bucket}, {"--out", o.out}, {"--state", o.state}};
    for (String[] req : required) {
      if (req[1] == null) {
        throw new UsageException("missing required option " + req[0]);
      }
    }
    if (o.scope != null && !o.collectionNames.isEmpty()) {
      throw new UsageException("--scope and --collection exclude each other (the library takes one filter)");
    }
    if (o.kvPort < 0) {
      throw new UsageException("missing required option --kv-port");
    }
    if (o.clientKeystore != null && o.tlsCa == null) {
      throw new UsageException("--client-keystore needs --tls-ca (client certificates need TLS)");
    }
    if (!List.of("trace", "debug", "info", "warn", "error", "off").contains(o.logLevel)) {
      throw new UsageException("bad --log-level " + o.logLevel);
    }
    return o;
  }

  /**
   * --env: what the command line does not give, from the variables `mockdcp check` and
   * `mockdcp run` set for a consumer command (mockdcp/cli/_scenario_commands.py consumer_env,
   * and the scenario's consumer settings MOCKDCP_BUFFER_SIZE and MOCKDCP_NOOP_INTERVAL).
   */
  static void fromEnvironment(Options o) throws UsageException {
    Map<String, String> env = System.getenv();
    if (o.host == null) o.host = env.get("MOCKDCP_HOST");
    if (o.kvPort < 0 && env.containsKey("MOCKDCP_KV_PORT")) {
      o.kvPort = parseInt("MOCKDCP_KV_PORT", env.get("MOCKDCP_KV_PORT"), 1, 65535);
    }
    if (o.user == null) o.user = env.get("MOCKDCP_USER");
    if (o.password == null) o.password = env.get("MOCKDCP_PASSWORD");
    if (o.bucket == null) o.bucket = env.get("MOCKDCP_BUCKET");
    if (o.output == null) o.output = env.get("MOCKDCP_OUTPUT");
    if (o.progress == null) o.progress = env.get("MOCKDCP_PROGRESS");
    if (o.flowControl == 0 && env.containsKey("MOCKDCP_BUFFER_SIZE")) {
      o.flowControl = parseInt("MOCKDCP_BUFFER_SIZE", env.get("MOCKDCP_BUFFER_SIZE"), 0, Integer.MAX_VALUE);
    }
    if (o.noopInterval == 0 && env.containsKey("MOCKDCP_NOOP_INTERVAL")) {
      // whole seconds: DCP_CONTROL set_noop_interval takes an integer
      double seconds = Double.parseDouble(env.get("MOCKDCP_NOOP_INTERVAL"));
      o.noopInterval = (int) Math.max(1, Math.round(seconds));
    }
  }

  private static int parseInt(String opt, String v, int min, int max) throws UsageException {
    try {
      int n = Integer.parseInt(v.trim());
      if (n < min || n > max) {
        throw new UsageException(opt + " out of range: " + v);
      }
      return n;
    } catch (NumberFormatException e) {
      throw new UsageException(opt + " wants a number, got " + v);
    }
  }

  private static List<Integer> parseVbuckets(String v) throws UsageException {
    if (v.equals("all")) {
      return null;
    }
    List<Integer> vbs = new ArrayList<>();
    for (String p : v.split(",")) {
      if (!p.isBlank()) {
        int vb = parseInt("--vbuckets", p, 0, 1023);
        if (!vbs.contains(vb)) {
          vbs.add(vb);
        }
      }
    }
    if (vbs.isEmpty()) {
      throw new UsageException("--vbuckets: empty list");
    }
    return vbs;
  }

  // -------------------------------------------------------------- JSON helpers

  /** DCP seqnos, CAS and vbuuids are unsigned 64-bit. */
  static void putU64(ObjectNode n, String field, long v) {
    if (v >= 0) {
      n.put(field, v);
    } else {
      n.put(field, new BigInteger(Long.toUnsignedString(v)));
    }
  }

  static long readU64(JsonNode n) {
    if (n == null || n.isNull()) {
      return 0;
    }
    if (n.isBigInteger()) {
      return n.bigIntegerValue().longValue();
    }
    if (n.isTextual()) {
      return Long.parseUnsignedLong(n.asText());
    }
    return n.asLong();
  }

  // -------------------------------------------------------------- event output

  static final class EventWriter implements AutoCloseable {
    /** null: events are not kept (--output without --out). */
    private final BufferedWriter w;
    private boolean closed;

    EventWriter(Path path) throws IOException {
      this.w = path == null ? null : Files.newBufferedWriter(path, StandardCharsets.UTF_8);
    }

    synchronized void emit(ObjectNode event) {
      if (closed || w == null) {
        return;
      }
      try {
        w.write(JSON.writeValueAsString(event));
        w.write('\n');
        w.flush();
      } catch (IOException e) {
        throw new RuntimeException("writing events file: " + e, e);
      }
    }

    @Override
    public synchronized void close() throws IOException {
      if (!closed) {
        closed = true;
        if (w != null) {
          w.close();
        }
      }
    }
  }

  static ObjectNode event(String type) {
    ObjectNode n = JSON.createObjectNode();
    n.put("event", type);
    return n;
  }

  // ------------------------------------------------------------ consumer state

  static final class Version {
    final long seqno;
    final int vb;
    final String value;
    final boolean deleted;
    final long rev;
    final long cas;

    Version(long seqno, int vb, String value, boolean deleted) {
      this(seqno, vb, value, deleted, 0, 0);
    }

    Version(long seqno, int vb, String value, boolean deleted, long rev, long cas) {
      this.seqno = seqno;
      this.vb = vb;
      this.value = value;
      this.deleted = deleted;
      this.rev = rev;
      this.cas = cas;
    }
  }

  static final class VbState {
    long seqno;
    long uuid;
    long snapStart;
    long snapEnd;
    /** Marker received but not yet applied (promoted by the first item of the snapshot). */
    SnapshotMarker pending;
    /** Last marker received, for the snap_start/snap_end fields of data events. */
    long markerStart;
    long markerEnd;
    List<FailoverLogEntry> lastEmittedFailoverLog;
  }

  /** A consumer's copy of the bucket: every version of every key, per-vbucket positions. */
  static final class ConsumerState {
    final Map<String, List<Version>> docs = new LinkedHashMap<>();
    final Map<Integer, VbState> vbs = new TreeMap<>();
    /** Names from the system events: collection id to {scope id, name}, scope id to name. */
    final Map<Long, Object[]> collections = new TreeMap<>();
    final Map<Long, String> scopes = new TreeMap<>(Map.of(0L, "_default"));
    /** Counts the changes to the documents (the --output writer rewrites when it moved). */
    long changes;

    static String docKey(long collection, String key) {
      return Long.toUnsignedString(collection) + ":" + key;
    }

    VbState vb(int vb) {
      return vbs.computeIfAbsent(vb, k -> new VbState());
    }

    void addVersion(long collection, String key, Version v) {
      docs.computeIfAbsent(docKey(collection, key), k -> new ArrayList<>()).add(v);
      changes++;
    }

    /** A collection dropped or flushed at seqno in vbucket vbid: its versions below are gone. */
    void forgetCollection(int vbid, long collection, long seqno) {
      String prefix = Long.toUnsignedString(collection) + ":";
      Iterator<Map.Entry<String, List<Version>>> it = docs.entrySet().iterator();
      while (it.hasNext()) {
        Map.Entry<String, List<Version>> e = it.next();
        if (e.getKey().startsWith(prefix)) {
          e.getValue().removeIf(v -> v.vb == vbid && Long.compareUnsigned(v.seqno, seqno) < 0);
          if (e.getValue().isEmpty()) {
            it.remove();
          }
        }
      }
      changes++;
    }

    /**
     * The live documents as the rows mockdcp's pipeline verify reads (mockdcp/client/_output.py:
     * scope, collection, key, value, seqno, rev, cas, vbucket); an id no system event named is
     * given in hex under the scope "_unknown", as the reference consumer does.
     */
    List<ObjectNode> documentRows() {
      List<ObjectNode> rows = new ArrayList<>();
      for (Map.Entry<String, List<Version>> e : new TreeMap<>(docs).entrySet()) {
        List<Version> versions = e.getValue();
        if (versions.isEmpty() || versions.get(versions.size() - 1).deleted) {
          continue;
        }
        Version last = versions.get(versions.size() - 1);
        int colon = e.getKey().indexOf(':');
        long cid = Long.parseUnsignedLong(e.getKey().substring(0, colon));
        ObjectNode row = JSON.createObjectNode();
        if (cid == 0) {
          row.put("scope", "_default");
          row.put("collection", "_default");
        } else if (collections.containsKey(cid)) {
          Object[] c = collections.get(cid);
          long sid = (Long) c[0];
          row.put("scope", scopes.getOrDefault(sid, "0x" + Long.toHexString(sid)));
          row.put("collection", (String) c[1]);
        } else {
          row.put("scope", "_unknown");
          row.put("collection", "0x" + Long.toHexString(cid));
        }
        row.put("key", e.getKey().substring(colon + 1));
        row.put("value", last.value);
        putU64(row, "seqno", last.seqno);
        putU64(row, "rev", last.rev);
        row.put("cas", last.cas);
        row.put("vbucket", last.vb);
        rows.add(row);
      }
      return rows;
    }

    /** Applies the item's seqno; a pending snapshot marker becomes current. */
    void advance(int vbid, long seqno) {
      VbState s = vb(vbid);
      s.seqno = seqno;
      if (s.pending != null) {
        s.snapStart = s.pending.getStartSeqno();
        s.snapEnd = s.pending.getEndSeqno();
        s.pending = null;
      }
    }

    /** Drops every version of vbucket vb newer than seqno and moves the vbucket back to it. */
    void rollback(int vbid, long seqno) {
      Iterator<Map.Entry<String, List<Version>>> it = docs.entrySet().iterator();
      while (it.hasNext()) {
        List<Version> versions = it.next().getValue();
        versions.removeIf(v -> v.vb == vbid && Long.compareUnsigned(v.seqno, seqno) > 0);
        if (versions.isEmpty()) {
          it.remove();
        }
      }
      VbState s = vb(vbid);
      s.seqno = seqno;
      s.snapStart = seqno;
      s.snapEnd = seqno;
      s.pending = null;
      changes++;
    }

    ObjectNode toJson() {
      ObjectNode root = JSON.createObjectNode();
      ObjectNode d = root.putObject("docs");
      for (Map.Entry<String, List<Version>> e : new TreeMap<>(docs).entrySet()) {
        List<Version> versions = e.getValue();
        if (versions.isEmpty()) {
          continue;
        }
        Version last = versions.get(versions.size() - 1);
        if (last.deleted) {
          continue;
        }
        ObjectNode o = d.putObject(e.getKey());
        o.put("value", last.value);
        putU64(o, "seqno", last.seqno);
        o.put("vb", last.vb);
      }
      ObjectNode v = root.putObject("vbuckets");
      for (Map.Entry<Integer, VbState> e : vbs.entrySet()) {
        VbState s = e.getValue();
        ObjectNode o = v.putObject(Integer.toString(e.getKey()));
        putU64(o, "seqno", s.seqno);
        putU64(o, "uuid", s.uuid);
        putU64(o, "snap_start", s.snapStart);
        putU64(o, "snap_end", s.snapEnd);
      }
      return root;
    }

    /**
     * How far the documents go, as `mockdcp check` reads MOCKDCP_PROGRESS
     * (mockdcp/client/_output.py write_progress): per vbucket the uuid of the failover-log entry
     * its position is on (the newest the library holds) and the seqno the documents hold through.
     */
    ObjectNode progressReport() {
      ObjectNode root = JSON.createObjectNode();
      ObjectNode v = root.putObject("vbuckets");
      for (Map.Entry<Integer, VbState> e : vbs.entrySet()) {
        ObjectNode o = v.putObject(Integer.toString(e.getKey()));
        putU64(o, "uuid", e.getValue().uuid);
        putU64(o, "seqno", e.getValue().seqno);
      }
      return root;
    }

    static ConsumerState load(Path path) throws IOException {
      JsonNode root = JSON.readTree(path.toFile());
      if (root == null || !root.isObject()) {
        throw new IOException(path + ": not a JSON object");
      }
      ConsumerState s = new ConsumerState();
      JsonNode docs = root.path("docs");
      for (Iterator<Map.Entry<String, JsonNode>> it = docs.fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> e = it.next();
        JsonNode d = e.getValue();
        s.docs.computeIfAbsent(e.getKey(), k -> new ArrayList<>()).add(new Version(
            readU64(d.get("seqno")), d.path("vb").asInt(), d.path("value").asText(""), false));
      }
      JsonNode vbs = root.path("vbuckets");
      for (Iterator<Map.Entry<String, JsonNode>> it = vbs.fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> e = it.next();
        int vb;
        try {
          vb = Integer.parseInt(e.getKey());
        } catch (NumberFormatException ex) {
          throw new IOException(path + ": bad vbucket " + e.getKey());
        }
        JsonNode j = e.getValue();
        VbState st = s.vb(vb);
        st.seqno = readU64(j.get("seqno"));
        st.uuid = readU64(j.get("uuid"));
        st.snapStart = readU64(j.get("snap_start"));
        st.snapEnd = readU64(j.get("snap_end"));
        st.markerStart = st.snapStart;
        st.markerEnd = st.snapEnd;
      }
      return s;
    }
  }

  // ------------------------------------------------------------------ consumer

  private final Options opts;
  private final Logger log;
  private final EventWriter events;
  private final ConsumerState state;
  private final Object lock = new Object();
  private Client client;
  /** Set once connect() succeeded; a failed connect() already disconnected the client. */
  private volatile boolean connected;
  private volatile boolean finished;

  MockdcpConsumer(Options opts, Logger log, EventWriter events, ConsumerState state) {
    this.opts = opts;
    this.log = log;
    this.events = events;
    this.state = state;
  }

  private void emitError(String message) {
    ObjectNode e = event("error");
    e.put("message", message);
    events.emit(e);
  }

  /** Emits the vbucket's failover log (kept by the library in its session state) when it changed. */
  private void maybeEmitFailoverLog(int vb) {
    PartitionState ps = client.sessionState().get(vb);
    if (ps == null) {
      return;
    }
    List<FailoverLogEntry> log = new ArrayList<>(ps.getFailoverLog());
    synchronized (lock) {
      VbState s = state.vb(vb);
      if (!log.isEmpty()) {
        s.uuid = log.get(0).getUuid();
      }
      if (log.isEmpty() || log.equals(s.lastEmittedFailoverLog)) {
        return;
      }
      s.lastEmittedFailoverLog = log;
      ObjectNode e = event("failover_log");
      e.put("vb", vb);
      ArrayNode entries = e.putArray("entries");
      for (FailoverLogEntry entry : log) {
        ArrayNode pair = entries.addArray();
        if (entry.getUuid() >= 0) pair.add(entry.getUuid()); else pair.add(new BigInteger(Long.toUnsignedString(entry.getUuid())));
        if (entry.getSeqno() >= 0) pair.add(entry.getSeqno()); else pair.add(new BigInteger(Long.toUnsignedString(entry.getSeqno())));
      }
      events.emit(e);
    }
  }

  private void onDataEvent(ChannelFlowController flowController, ByteBuf event) {
    try {
      String type;
      if (DcpMutationMessage.is(event)) {
        type = "mutation";
      } else if (DcpDeletionMessage.is(event)) {
        type = "deletion";
      } else if (DcpExpirationMessage.is(event)) {
        type = "expiration";
      } else {
        log.warn("unexpected data event {}", MessageUtil.humanize(event));
        return;
      }
      int vb = MessageUtil.getVbucket(event);
      maybeEmitFailoverLog(vb);
      // bySeqno, revisionSeqno and cas sit at the same place for all three messages.
      long seqno = DcpMutationMessage.bySeqno(event);
      long rev = DcpMutationMessage.revisionSeqno(event);
      long cas = MessageUtil.getCas(event);
      CollectionIdAndKey ck = MessageUtil.getCollectionIdAndKey(event, opts.collections);
      ContentAndXattrs body = MessageUtil.getContentAndXattrs(event);
      String value = new String(body.content(), StandardCharsets.UTF_8);
      boolean mutation = type.equals("mutation");

      synchronized (lock) {
        state.advance(vb, seqno);
        VbState s = state.vb(vb);
        state.addVersion(ck.collectionId(), ck.key(), new Version(seqno, vb, value, !mutation, rev, cas));

        ObjectNode e = event(type);
        e.put("vb", vb);
        putU64(e, "seqno", seqno);
        putU64(e, "rev", rev);
        putU64(e, "cas", cas);
        e.put("key", ck.key());
        e.put("collection", ck.collectionId());
        e.put("value", value);
        e.put("flags", mutation ? Integer.toUnsignedLong(DcpMutationMessage.flags(event)) : 0L);
        e.put("expiry", mutation ? Integer.toUnsignedLong(DcpMutationMessage.expiry(event)) : 0L);
        e.put("datatype", MessageUtil.getDataType(event) & 0xff);
        if (opts.xattrs) {
          ObjectNode x = e.putObject("xattrs");
          body.xattrs().forEach(x::put);
        }
        putU64(e, "snap_start", s.markerStart);
        putU64(e, "snap_end", s.markerEnd);
        events.emit(e);
      }
    } catch (RuntimeException ex) {
      log.error("failed to handle data event", ex);
      emitError("data event: " + ex);
    } finally {
      flowController.ack(event);
      event.release();
    }
  }

  private void onControlEvent(ChannelFlowController flowController, ByteBuf event) {
    try {
      if (RollbackMessage.is(event)) {
        int vb = RollbackMessage.vbucket(event);
        long seqno = RollbackMessage.seqno(event);
        synchronized (lock) {
          state.rollback(vb, seqno);
          ObjectNode e = event("rollback");
          e.put("vb", vb);
          putU64(e, "seqno", seqno);
          events.emit(e);
        }
        log.info("rollback of vbucket {} to seqno {}; restarting its stream", vb, seqno);
        client.rollbackAndRestartStream(vb, seqno).subscribe(
            ignored -> { },
            err -> {
              log.error("restarting stream of vbucket {} after rollback failed", vb, err);
              emitError("rollback restart vb " + vb + ": " + err);
            },
            () -> maybeEmitFailoverLog(vb));
      } else if (DcpSnapshotMarkerRequest.is(event)) {
        int vb = DcpSnapshotMarkerRequest.partition(event);
        maybeEmitFailoverLog(vb);
        long start = DcpSnapshotMarkerRequest.startSeqno(event);
        long end = DcpSnapshotMarkerRequest.endSeqno(event);
        synchronized (lock) {
          VbState s = state.vb(vb);
          s.pending = new SnapshotMarker(start, end);
          s.markerStart = start;
          s.markerEnd = end;
          ObjectNode e = event("snapshot");
          e.put("vb", vb);
          putU64(e, "start", start);
          putU64(e, "end", end);
          e.put("flags", DcpSnapshotMarkerRequest.flagsAsInt(event));
          events.emit(e);
        }
      } else if (DcpSeqnoAdvancedRequest.is(event)) {
        int vb = MessageUtil.getVbucket(event);
        maybeEmitFailoverLog(vb);
        long seqno = DcpSeqnoAdvancedRequest.getSeqno(event);
        synchronized (lock) {
          VbState s = state.vb(vb);
          s.seqno = seqno;
          s.snapStart = seqno;
          s.snapEnd = seqno;
          s.pending = null;
          ObjectNode e = event("seqno_advanced");
          e.put("vb", vb);
          putU64(e, "seqno", seqno);
          events.emit(e);
        }
      } else if (DcpSystemEventRequest.is(event)) {
        int vb = MessageUtil.getVbucket(event);
        maybeEmitFailoverLog(vb);
        long seqno = DcpSystemEventRequest.getSeqno(event);
        ObjectNode e = event("system_event");
        e.put("vb", vb);
        putU64(e, "seqno", seqno);
        e.put("id", DcpSystemEventRequest.getId(event));
        e.put("version", DcpSystemEventRequest.getVersion(event));
        DcpSystemEvent se = DcpSystemEvent.parse(event);
        if (se != null) {
          e.put("type", se.getType().name().toLowerCase(Locale.ROOT));
        }
        if (se instanceof CollectionCreated) {
          CollectionCreated c = (CollectionCreated) se;
          putU64(e, "manifest_uid", c.getManifestId());
          e.put("scope_id", c.getScopeId());
          e.put("collection_id", c.getCollectionId());
          e.put("name", c.getCollectionName());
          c.getMaxTtl().ifPresent(ttl -> e.put("max_ttl", ttl));
        } else if (se instanceof CollectionDropped) {
          CollectionDropped c = (CollectionDropped) se;
          putU64(e, "manifest_uid", c.getManifestId());
          e.put("scope_id", c.getScopeId());
          e.put("collection_id", c.getCollectionId());
        } else if (se instanceof CollectionFlushed) {
          CollectionFlushed c = (CollectionFlushed) se;
          putU64(e, "manifest_uid", c.getManifestId());
          e.put("scope_id", c.getScopeId());
          e.put("collection_id", c.getCollectionId());
        } else if (se instanceof ScopeCreated) {
          ScopeCreated c = (ScopeCreated) se;
          putU64(e, "manifest_uid", c.getManifestId());
          e.put("scope_id", c.getScopeId());
          e.put("name", c.getScopeName());
        } else if (se instanceof ScopeDropped) {
          ScopeDropped c = (ScopeDropped) se;
          putU64(e, "manifest_uid", c.getManifestId());
          e.put("scope_id", c.getScopeId());
        }
        synchronized (lock) {
          state.advance(vb, seqno);
          if (se instanceof CollectionCreated) {
            CollectionCreated c = (CollectionCreated) se;
            state.collections.put(c.getCollectionId() & 0xffffffffL,
                new Object[]{c.getScopeId() & 0xffffffffL, c.getCollectionName()});
          } else if (se instanceof ScopeCreated) {
            ScopeCreated c = (ScopeCreated) se;
            state.scopes.put(c.getScopeId() & 0xffffffffL, c.getScopeName());
          } else if (se instanceof CollectionDropped) {
            state.forgetCollection(vb, ((CollectionDropped) se).getCollectionId() & 0xffffffffL, seqno);
          } else if (se instanceof CollectionFlushed) {
            state.forgetCollection(vb, ((CollectionFlushed) se).getCollectionId() & 0xffffffffL, seqno);
          }
          events.emit(e);
        }
      } else {
        log.debug("ignoring control event {}", MessageUtil.humanize(event));
      }
    } catch (RuntimeException ex) {
      log.error("failed to handle control event", ex);
      emitError("control event: " + ex);
    } finally {
      flowController.ack(event);
      event.release();
    }
  }

  private void onSystemEvent(CouchbaseEvent event) {
    if (event instanceof StreamEndEvent) {
      StreamEndEvent se = (StreamEndEvent) event;
      maybeEmitFailoverLog(se.partition());
      ObjectNode e = event("stream_end");
      e.put("vb", se.partition());
      e.put("reason", se.reason().value());
      e.put("reason_name", se.reason().name());
      events.emit(e);
      log.info("stream end: vbucket {} reason {}", se.partition(), se.reason());
    } else if (event instanceof DcpFailureEvent) {
      log.warn("library reported failure: {}", event);
      emitError(event.toString());
    } else {
      log.debug("system event {}", event);
    }
  }

  /**
   * The settings the Couchbase connectors put on the client with their default configuration
   * (kafka-connect-couchbase CouchbaseReader and couchbase-elasticsearch-connector: collections
   * aware, compression on, rollback mitigation polling OBSERVE_SEQNO every 100 ms, a 16 MiB flow
   * control buffer acknowledged at 60 %; the Kafka connector also asks for change streams and
   * IGNORE_PURGED_TOMBSTONES when the server offers them, the Elasticsearch one sets a 20 s noop).
   */
  static void applyConnectorProfile(Client.Builder builder, String profile) {
    builder.collectionsAware(true)
        .compression(CompressionMode.ENABLED)
        .mitigateRollbacks(100, TimeUnit.MILLISECONDS)
        .flowControl(16 * 1024 * 1024)
        .bufferAckWatermark(60);
    if (profile.equals("kafka")) {
      builder.noValue(false)
          .xattrs(false)
          .optionalControlParam("change_streams", true)
          .optionalStreamFlags(java.util.Set.of(com.couchbase.client.dcp.message.StreamFlag.IGNORE_PURGED_TOMBSTONES));
    } else {
      builder.controlParam(DcpControl.Names.SET_NOOP_INTERVAL, 20);
    }
  }

  void run() throws Exception {
    Client.Builder builder = Client.builder()
        .seedNodes(opts.host + ":" + opts.kvPort)
        .bucket(opts.bucket)
        // The library waits bootstrapTimeout plus one config refresh interval (2 s) for the first
        // cluster map; keep the total near --connect-timeout-seconds.
        .bootstrapTimeout(Duration.ofSeconds(Math.max(1, opts.connectTimeoutSeconds - 2)))
        .socketConnectTimeout(Math.min(opts.connectTimeoutSeconds, 10) * 1000L);
    if (opts.tlsCa != null) {
      // as a user of couchbases:// does: trust the cluster's CA, keep hostname verification on
      builder.securityConfig(b -> b.enableTls(true).trustCertificate(Paths.get(opts.tlsCa)));
    }
    if (opts.clientKeystore != null) {
      builder.authenticator(CertificateAuthenticator.fromKeyStore(
          Paths.get(opts.clientKeystore), opts.clientKeystorePassword, "PKCS12"));
    } else {
      builder.credentials(opts.user, opts.password);
    }
    if (opts.collections) {
      builder.collectionsAware(true);
      if (!opts.collectionNames.isEmpty()) {
        builder.collectionNames(opts.collectionNames);
      }
      if (opts.scope != null) {
        builder.scopeName(opts.scope);
      }
    }
    if (opts.profile != null) {
      applyConnectorProfile(builder, opts.profile);
    }
    if (opts.flowControl > 0) {
      builder.flowControl(opts.flowControl);
    }
    if (opts.xattrs) {
      builder.xattrs(true);
    }
    if (opts.noValue) {
      builder.noValue(true);
    }
    if (opts.expiryOpcode) {
      builder.optionalControlParam(DcpControl.Names.ENABLE_EXPIRY_OPCODE.value(), true);
    }
    if (opts.noopInterval > 0) {
      builder.controlParam(DcpControl.Names.SET_NOOP_INTERVAL, opts.noopInterval);
    }
    client = builder.build();
    if (opts.output != null) {
      startOutputWriter();
    }
    client.controlEventHandler(this::onControlEvent);
    client.dataEventHandler(this::onDataEvent);
    client.systemEventHandler(this::onSystemEvent);

    log.info("connecting to {}:{} bucket {}", opts.host, opts.kvPort, opts.bucket);
    try {
      client.connect().block(Duration.ofSeconds(opts.connectTimeoutSeconds + 10L));
    } catch (RuntimeException e) {
      throw new IllegalStateException("could not connect to " + opts.host + ":" + opts.kvPort
          + " (bucket " + opts.bucket + ") within " + opts.connectTimeoutSeconds + " s", e);
    }
    connected = true;
    int numPartitions = client.numPartitions();
    log.info("connected; bucket has {} vbuckets", numPartitions);

    List<Integer> vbs = new ArrayList<>();
    if (opts.vbuckets == null) {
      for (int i = 0; i < numPartitions; i++) {
        vbs.add(i);
      }
    } else {
      for (int vb : opts.vbuckets) {
        if (vb >= numPartitions) {
          throw new IllegalArgumentException("--vbuckets: vbucket " + vb + " does not exist (bucket has "
              + numPartitions + ")");
        }
        vbs.add(vb);
      }
    }

    client.initializeState(StreamFrom.BEGINNING, StreamTo.INFINITY).block();
    if (opts.resumeFrom != null) {
      Map<Integer, StreamOffset> offsets = new LinkedHashMap<>();
      synchronized (lock) {
        for (int vb : vbs) {
          VbState s = state.vbs.get(vb);
          offsets.put(vb, s == null ? StreamOffset.ZERO
              : new StreamOffset(s.uuid, s.seqno, new SnapshotMarker(s.snapStart, s.snapEnd), 0));
          state.vb(vb);
        }
      }
      log.info("resuming {} vbuckets from {}", offsets.size(), opts.resumeFrom);
      client.resumeStreaming(offsets).block();
    } else {
      synchronized (lock) {
        for (int vb : vbs) {
          state.vb(vb);
        }
      }
      client.startStreaming(vbs).block();
    }
    for (int vb : vbs) {
      maybeEmitFailoverLog(vb);
    }
    events.emit(event("ready"));
    log.info("streaming {} vbuckets", vbs.size());
  }

  /** --output: how often the documents are rewritten while they change (milliseconds). */
  private static final long OUTPUT_EVERY_MS = 100;
  /** The change count of the documents last written to --output (-1: none yet). */
  private long outputWritten = -1;

  /** Rewrites --output whenever the documents changed, every OUTPUT_EVERY_MS. */
  private void startOutputWriter() {
    Thread t = new Thread(() -> {
      while (!finished) {
        try {
          writeOutput(false);
          Thread.sleep(OUTPUT_EVERY_MS);
        } catch (InterruptedException e) {
          return;
        } catch (IOException e) {
          log.error("writing --output failed", e);
        }
      }
    }, "output-writer");
    t.setDaemon(true);
    t.start();
  }

  /** The --progress report last written (null: none yet). */
  private String progressWritten;

  /**
   * Replaces --output with the live documents (written beside it, then renamed) when they
   * changed, then --progress with how far they go when that changed: taken under the same lock as
   * the documents, so the report is never ahead of the output.
   */
  private synchronized void writeOutput(boolean always) throws IOException {
    List<ObjectNode> rows = null;
    String report = null;
    synchronized (lock) {
      if (opts.progress != null) {
        report = JSON.writeValueAsString(state.progressReport());
      }
      if (always || state.changes != outputWritten) {
        outputWritten = state.changes;
        rows = state.documentRows();
      }
    }
    if (rows != null) {
      Path path = Paths.get(opts.output);
      Path tmp = path.resolveSibling("." + path.getFileName() + ".writing");
      try (BufferedWriter w = Files.newBufferedWriter(tmp, StandardCharsets.UTF_8)) {
        for (ObjectNode row : rows) {
          w.write(JSON.writeValueAsString(row));
          w.write('\n');
        }
      }
      Files.move(tmp, path, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }
    if (report != null && (rows != null || !report.equals(progressWritten))) {
      Path path = Paths.get(opts.progress);
      Path tmp = path.resolveSibling("." + path.getFileName() + ".writing");
      Files.writeString(tmp, report, StandardCharsets.UTF_8);
      Files.move(tmp, path, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
      progressWritten = report;
    }
  }

  /** Stop requested (stdin EOF, SIGTERM/SIGINT): write state, disconnect, exit 0. */
  void stop(String why) {
    log.info("stopping: {}", why);
    finish(true);
    System.exit(0);
  }

  /** Writes the state file, disconnects, closes the events file. Runs once. */
  synchronized void finish(boolean writeState) {
    if (finished) {
      return;
    }
    finished = true;
    if (writeState && opts.output != null) {
      try {
        writeOutput(true);
        log.info("wrote the documents to {}", opts.output);
      } catch (Exception e) {
        log.error("writing --output failed", e);
      }
    }
    if (writeState && opts.state != null) {
      try {
        ObjectNode json;
        synchronized (lock) {
          if (client != null) {
            for (Map.Entry<Integer, VbState> e : state.vbs.entrySet()) {
              PartitionState ps = client.sessionState().get(e.getKey());
              if (ps != null && ps.getLastUuid() != 0) {
                e.getValue().uuid = ps.getLastUuid();
              }
            }
          }
          json = state.toJson();
        }
        Path path = Paths.get(opts.state);
        Path tmp = path.resolveSibling(path.getFileName() + ".tmp");
        Files.write(tmp, JSON.writer().with(SerializationFeature.INDENT_OUTPUT).writeValueAsBytes(json));
        Files.move(tmp, path, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        log.info("wrote state to {}", path);
      } catch (Exception e) {
        log.error("writing state file failed", e);
      }
    }
    if (client != null && connected) {
      try {
        client.disconnect().block(Duration.ofSeconds(10));
      } catch (Exception e) {
        log.warn("disconnect: {}", e.toString());
      }
    }
    try {
      events.close();
    } catch (IOException e) {
      log.warn("closing events file: {}", e.toString());
    }
  }

  // ---------------------------------------------------------------------- main

  private static void configureLogging(String level) {
    System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
    System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", level);
    System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
    System.setProperty("org.slf4j.simpleLogger.dateTimeFormat", "HH:mm:ss.SSS");
    System.setProperty("org.slf4j.simpleLogger.showShortLogName", "true");
    System.setProperty("org.slf4j.simpleLogger.showLogName", "false");
  }

  private static String describe(Throwable t) {
    StringBuilder sb = new StringBuilder(String.valueOf(t));
    for (Throwable c = t.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
      sb.append(": caused by ").append(c);
    }
    return sb.toString();
  }

  public static void main(String[] args) {
    // Nothing may ever be printed on stdout.
    PrintStream stdout = System.out;
    System.setOut(System.err);

    for (String a : args) {
      if (a.equals("--help") || a.equals("-h")) {
        stdout.println(USAGE);
        stdout.flush();
        System.exit(0);
      }
    }
    Options opts;
    try {
      opts = parseArgs(args);
    } catch (UsageException e) {
      System.err.println("mockdcp-interop-java: " + e.getMessage());
      System.err.println("(--help for usage)");
      System.exit(2);
      return;
    }
    configureLogging(opts.logLevel);
    Logger log = LoggerFactory.getLogger(MockdcpConsumer.class);

    ConsumerState state;
    EventWriter events;
    try {
      state = opts.resumeFrom != null ? ConsumerState.load(Paths.get(opts.resumeFrom)) : new ConsumerState();
      events = new EventWriter(opts.out == null ? null : Paths.get(opts.out));
    } catch (IOException e) {
      System.err.println("mockdcp-interop-java: fatal: " + e);
      System.exit(1);
      return;
    }

    MockdcpConsumer consumer = new MockdcpConsumer(opts, log, events, state);
    Thread hook = new Thread(() -> consumer.finish(true), "shutdown-hook");
    Runtime.getRuntime().addShutdownHook(hook);

    // Stop on stdin EOF, or on SIGTERM / SIGINT (handled like EOF so the exit code is 0).
    Thread stdinWatcher = new Thread(() -> {
      byte[] buf = new byte[4096];
      try (InputStream in = System.in) {
        while (in.read(buf) >= 0) {
          // discard
        }
      } catch (IOException ignored) {
        // treat like EOF
      }
      consumer.stop("stdin reached EOF");
    }, "stdin-watcher");
    stdinWatcher.setDaemon(true);
    if (!opts.env) { // `mockdcp check` and `run` stop their consumer with SIGTERM
      stdinWatcher.start();
    }
    for (String sig : new String[]{"TERM", "INT"}) {
      try {
        sun.misc.Signal.handle(new sun.misc.Signal(sig), s -> consumer.stop("SIG" + sig));
      } catch (IllegalArgumentException e) {
        log.warn("cannot handle SIG{}: {}; relying on the shutdown hook", sig, e.toString());
      }
    }

    try {
      consumer.run();
    } catch (Throwable t) {
      String msg = describe(t);
      System.err.println("mockdcp-interop-java: fatal: " + msg);
      log.debug("fatal error", t);
      events.emit(errorEvent(msg));
      consumer.finish(false);
      Runtime.getRuntime().halt(1);
    }
    // Streaming runs on the library's threads; the stop paths above end the process.
    try {
      new CountDownLatch(1).await();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static ObjectNode errorEvent(String message) {
    ObjectNode e = event("error");
    e.put("message", message);
    return e;
  }
}
