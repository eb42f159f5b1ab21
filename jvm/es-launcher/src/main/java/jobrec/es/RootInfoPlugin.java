package jobrec.es;

import org.elasticsearch.Build;
import org.elasticsearch.client.internal.node.NodeClient;
import org.elasticsearch.cluster.metadata.IndexNameExpressionResolver;
import org.elasticsearch.cluster.node.DiscoveryNodes;
import org.elasticsearch.cluster.service.ClusterService;
import org.elasticsearch.common.bytes.BytesArray;
import org.elasticsearch.common.io.stream.NamedWriteableRegistry;
import org.elasticsearch.common.settings.ClusterSettings;
import org.elasticsearch.common.settings.IndexScopedSettings;
import org.elasticsearch.common.settings.Settings;
import org.elasticsearch.common.settings.SettingsFilter;
import org.elasticsearch.features.NodeFeature;
import org.elasticsearch.index.IndexVersion;
import org.elasticsearch.plugins.ActionPlugin;
import org.elasticsearch.plugins.Plugin;
import org.elasticsearch.rest.BaseRestHandler;
import org.elasticsearch.rest.RestController;
import org.elasticsearch.rest.RestHandler;
import org.elasticsearch.rest.RestRequest;
import org.elasticsearch.rest.RestResponse;
import org.elasticsearch.rest.RestStatus;
import org.elasticsearch.xcontent.XContentBuilder;

import java.util.Collection;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Predicate;
import java.util.function.Supplier;

/**
 * Serves {@code GET /} and {@code HEAD /}, the node-information endpoint.
 *
 * <p>In the distribution this endpoint comes from the {@code rest-root} module, which Elastic does
 * not publish to Maven Central. Clients need it: the ES-Hadoop connector reads the version from it
 * before any read or write, and the Python client's {@code info()} and {@code ping()} call it. The
 * body has the fields and shape of the original.
 */
public final class RootInfoPlugin extends Plugin implements ActionPlugin {
    private final AtomicReference<ClusterService> clusterService = new AtomicReference<>();

    @Override
    public Collection<?> createComponents(PluginServices services) {
        clusterService.set(services.clusterService());
        return List.of();
    }

    @Override
    public Collection<RestHandler> getRestHandlers(
        Settings settings,
        NamedWriteableRegistry namedWriteableRegistry,
        RestController restController,
        ClusterSettings clusterSettings,
        IndexScopedSettings indexScopedSettings,
        SettingsFilter settingsFilter,
        IndexNameExpressionResolver indexNameExpressionResolver,
        Supplier<DiscoveryNodes> nodesInCluster,
        Predicate<NodeFeature> clusterSupportsFeature
    ) {
        return List.of(new RootHandler());
    }

    private final class RootHandler extends BaseRestHandler {
        @Override
        public String getName() {
            return "jobrec_root_info";
        }

        @Override
        public List<Route> routes() {
            return List.of(new Route(RestRequest.Method.GET, "/"), new Route(RestRequest.Method.HEAD, "/"));
        }

        @Override
        protected RestChannelConsumer prepareRequest(RestRequest request, NodeClient client) {
            ClusterService cluster = clusterService.get();
            if (request.method() == RestRequest.Method.HEAD) {
                return channel -> channel.sendResponse(new RestResponse(RestStatus.OK, "application/json", BytesArray.EMPTY));
            }
            return channel -> {
                Build build = Build.current();
                XContentBuilder body = channel.newBuilder();
                body.startObject();
                body.field("name", cluster.getNodeName());
                body.field("cluster_name", cluster.getClusterName().value());
                body.field("cluster_uuid", cluster.state().metadata().clusterUUID());
                body.startObject("version")
                    .field("number", build.qualifiedVersion())
                    .field("build_flavor", build.flavor())
                    .field("build_type", build.type().displayName())
                    .field("build_hash", build.hash())
                    .field("build_date", build.date())
                    .field("build_snapshot", build.isSnapshot())
                    .field("lucene_version", IndexVersion.current().luceneVersion().toString())
                    .field("minimum_wire_compatibility_version", build.minWireCompatVersion())
                    .field("minimum_index_compatibility_version", build.minIndexCompatVersion())
                    .endObject();
                body.field("tagline", "You Know, for Search");
                body.endObject();
                channel.sendResponse(new RestResponse(RestStatus.OK, body));
            };
        }
    }
}
