import java.lang.reflect.Proxy;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;
import net.spy.memcached.*;

// Prints, for each key of keys.txt, the index of the node spymemcached's own
// locator picks. Args: factory (default|ketama|ketama-libmemcached|ketama-weighted) hosts...
public class SpyVec {
  public static void main(String[] a) throws Exception {
    String kind = a[0];
    List<InetSocketAddress> addrs = AddrUtil.getAddresses(a[1]);
    List<MemcachedNode> nodes = new ArrayList<>();
    for (InetSocketAddress sa : addrs) {
      nodes.add((MemcachedNode) Proxy.newProxyInstance(SpyVec.class.getClassLoader(), new Class<?>[]{MemcachedNode.class},
        (p, m, args) -> {
          switch (m.getName()) {
            case "getSocketAddress": return sa;
            case "toString": return "node " + sa;
            case "hashCode": return System.identityHashCode(p);
            case "equals": return p == args[0];
            default: throw new UnsupportedOperationException(m.getName());
          }
        }));
    }
    ConnectionFactory f;
    switch (kind) {
      case "default": f = new DefaultConnectionFactory(); break;
      case "ketama-libmemcached":
        f = new KetamaConnectionFactory(DefaultConnectionFactory.DEFAULT_OP_QUEUE_LEN, DefaultConnectionFactory.DEFAULT_READ_BUFFER_SIZE,
          DefaultConnectionFactory.DEFAULT_OP_QUEUE_MAX_BLOCK_TIME, DefaultHashAlgorithm.KETAMA_HASH, KetamaNodeKeyFormatter.Format.LIBMEMCACHED,
          new HashMap<InetSocketAddress, Integer>()); break;
      case "ketama-weighted": {
        Map<InetSocketAddress, Integer> w = new HashMap<>();
        String[] ws = a[2].split(",");
        for (int i = 0; i < addrs.size(); i++) w.put(addrs.get(i), Integer.parseInt(ws[i]));
        f = new KetamaConnectionFactory(DefaultConnectionFactory.DEFAULT_OP_QUEUE_LEN, DefaultConnectionFactory.DEFAULT_READ_BUFFER_SIZE,
          DefaultConnectionFactory.DEFAULT_OP_QUEUE_MAX_BLOCK_TIME, DefaultHashAlgorithm.KETAMA_HASH, KetamaNodeKeyFormatter.Format.SPYMEMCACHED, w);
        break;
      }
      case "ketama": f = new KetamaConnectionFactory(); break;
      default: throw new IllegalArgumentException(kind);
    }
    NodeLocator loc = f.createLocator(nodes);
    System.out.println("# locator " + loc.getClass().getName() + ", hash " + f.getHashAlg());
    int[] counts = new int[nodes.size()];
    StringBuilder out = new StringBuilder();
    for (String line : Files.readAllLines(Paths.get("/work/shared/golden/keys.txt"), StandardCharsets.UTF_8)) {
      int idx = nodes.indexOf(loc.getPrimary(line));
      counts[idx]++;
      out.append(line).append('\t').append(idx).append('\n');
    }
    System.out.println("# per-node counts " + Arrays.toString(counts));
    System.out.print(out);
  }
}
