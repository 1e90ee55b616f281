import com.github.javaparser.JavaParser;
import com.github.javaparser.JavaToken;
import com.github.javaparser.ParseResult;
import com.github.javaparser.ParserConfiguration;
import com.github.javaparser.TokenRange;
import com.github.javaparser.ast.CompilationUnit;
import com.github.javaparser.ast.ImportDeclaration;
import com.github.javaparser.ast.Node;
import com.github.javaparser.ast.body.AnnotationDeclaration;
import com.github.javaparser.ast.body.BodyDeclaration;
import com.github.javaparser.ast.body.CallableDeclaration;
import com.github.javaparser.ast.body.ClassOrInterfaceDeclaration;
import com.github.javaparser.ast.body.ConstructorDeclaration;
import com.github.javaparser.ast.body.EnumConstantDeclaration;
import com.github.javaparser.ast.body.EnumDeclaration;
import com.github.javaparser.ast.body.FieldDeclaration;
import com.github.javaparser.ast.body.MethodDeclaration;
import com.github.javaparser.ast.body.Parameter;
import com.github.javaparser.ast.body.RecordDeclaration;
import com.github.javaparser.ast.body.TypeDeclaration;
import com.github.javaparser.ast.body.VariableDeclarator;
import com.github.javaparser.ast.comments.Comment;
import com.github.javaparser.ast.comments.JavadocComment;
import com.github.javaparser.ast.expr.CastExpr;
import com.github.javaparser.ast.expr.EnclosedExpr;
import com.github.javaparser.ast.expr.Expression;
import com.github.javaparser.ast.expr.FieldAccessExpr;
import com.github.javaparser.ast.expr.LambdaExpr;
import com.github.javaparser.ast.expr.MethodCallExpr;
import com.github.javaparser.ast.expr.NameExpr;
import com.github.javaparser.ast.expr.ObjectCreationExpr;
import com.github.javaparser.ast.expr.SuperExpr;
import com.github.javaparser.ast.expr.ThisExpr;
import com.github.javaparser.ast.expr.TypePatternExpr;
import com.github.javaparser.ast.expr.VariableDeclarationExpr;
import com.github.javaparser.ast.stmt.BlockStmt;
import com.github.javaparser.ast.stmt.CatchClause;
import com.github.javaparser.ast.stmt.ExpressionStmt;
import com.github.javaparser.ast.stmt.ForEachStmt;
import com.github.javaparser.ast.stmt.ForStmt;
import com.github.javaparser.ast.stmt.LocalClassDeclarationStmt;
import com.github.javaparser.ast.stmt.LocalRecordDeclarationStmt;
import com.github.javaparser.ast.stmt.Statement;
import com.github.javaparser.ast.stmt.TryStmt;
import com.github.javaparser.ast.type.ClassOrInterfaceType;
import com.github.javaparser.ast.type.Type;
import com.github.javaparser.ast.type.TypeParameter;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * Gold facts about a Java source tree: definitions (types, methods, constructors) and the calls
 * that resolve to exactly one definition of the tree. Built on JavaParser's syntax tree alone; a
 * call whose target depends on anything the tree does not show is left out.
 *
 * <p>Usage: {@code java -cp javaparser-core.jar:. Oracle ROOT} prints one JSON object.
 */
public final class Oracle {

    // ---------------------------------------------------------------- model

    /** A type of the tree: named (top-level, member, local) or anonymous (class body, enum constant body). */
    static final class TypeInfo {
        final Node node;
        final FileInfo file;
        final String name;
        final String qualname;   // dotted nesting of named definitions; null when anonymous
        final String fqn;        // package + member nesting; null for local and anonymous types
        final String kind;
        final Map<String, TypeInfo> memberTypes = new HashMap<>();
        final Map<String, List<MethodInfo>> methods = new HashMap<>();
        final Map<String, FieldInfo> fields = new HashMap<>();
        final Set<String> typeParams = new HashSet<>();
        List<Object> supers;     // TypeInfo, Jdk or UNKNOWN, resolved lazily
        boolean resolvingSupers;

        TypeInfo(Node node, FileInfo file, String name, String qualname, String fqn, String kind) {
            this.node = node;
            this.file = file;
            this.name = name;
            this.qualname = qualname;
            this.fqn = fqn;
            this.kind = kind;
        }

        boolean named() {
            return qualname != null;
        }
    }

    record MethodInfo(String name, List<String> params, boolean varargs) {
        boolean accepts(int arity) {
            return varargs ? arity >= params.size() - 1 : arity == params.size();
        }

        boolean sameParams(MethodInfo other) {
            if (params.size() != other.params.size()) {
                return false;
            }
            for (int i = 0; i < params.size(); i++) {
                String a = params.get(i);
                String b = other.params.get(i);
                if (!a.equals(b) && !a.equals("*") && !b.equals("*")) {
                    return false;
                }
            }
            return true;
        }
    }

    record FieldInfo(Type type, Node context) {
    }

    /** A JDK type whose members are known here; any other type outside the tree is opaque. */
    record Jdk(String fqn, Map<String, Set<Integer>> methods, Set<String> memberTypes, List<String> supers) {
    }

    static final class FileInfo {
        final String path;
        final CompilationUnit cu;
        final String pkg;
        final Map<String, String> singleImports = new HashMap<>();
        final List<String> onDemandImports = new ArrayList<>();
        final Map<String, List<String>> staticSingle = new HashMap<>();
        final List<String> staticOnDemand = new ArrayList<>();

        FileInfo(String path, CompilationUnit cu) {
            this.path = path;
            this.cu = cu;
            this.pkg = cu.getPackageDeclaration().map(p -> p.getNameAsString()).orElse("");
            for (ImportDeclaration imp : cu.getImports()) {
                String name = imp.getNameAsString();
                if (imp.isStatic()) {
                    if (imp.isAsterisk()) {
                        staticOnDemand.add(name);
                    } else {
                        int dot = name.lastIndexOf('.');
                        staticSingle.computeIfAbsent(name.substring(dot + 1), k -> new ArrayList<>())
                                .add(name.substring(0, Math.max(dot, 0)));
                    }
                } else if (imp.isAsterisk()) {
                    onDemandImports.add(name);
                } else {
                    singleImports.put(name.substring(name.lastIndexOf('.') + 1), name);
                }
            }
        }
    }

    record Definition(String path, String qualname, String name, String kind, String container, int startLine,
                      int endLine, int startColumn, String doc, String signature, String bodySha, boolean test) {
    }

    /** Outcome of a lookup that may be certain, certainly empty, or unknowable from the tree. */
    enum Certainty { FOUND, NONE, UNCERTAIN }

    record Lookup(Certainty how, TypeInfo owner) {
        static final Lookup NONE = new Lookup(Certainty.NONE, null);
        static final Lookup UNCERTAIN = new Lookup(Certainty.UNCERTAIN, null);
    }

    record VarLookup(Certainty how, Type type, Node context) {
        static final VarLookup NONE = new VarLookup(Certainty.NONE, null, null);
        static final VarLookup UNCERTAIN = new VarLookup(Certainty.UNCERTAIN, null, null);
    }

    private static final Object UNKNOWN = new Object();
    private static final Object NOT_FOUND = new Object();

    // ---------------------------------------------------------------- JDK types seen as supertypes

    private static final Map<String, Jdk> JDK = new HashMap<>();

    private static void jdk(String fqn, String supers, String memberTypes, String methods) {
        Map<String, Set<Integer>> byName = new HashMap<>();
        for (String m : methods.split(" ")) {
            if (!m.isEmpty()) {
                String[] parts = m.split("/");
                byName.computeIfAbsent(parts[0], k -> new HashSet<>()).add(Integer.parseInt(parts[1]));
            }
        }
        JDK.put(fqn, new Jdk(fqn, byName, new HashSet<>(Arrays.asList(memberTypes.split(" "))),
                Arrays.stream(supers.split(" ")).filter(s -> !s.isEmpty()).collect(Collectors.toList())));
    }

    static {
        String throwable = "getMessage/0 getLocalizedMessage/0 getCause/0 initCause/1 toString/0 "
                + "printStackTrace/0 printStackTrace/1 getStackTrace/0 setStackTrace/1 fillInStackTrace/0 "
                + "addSuppressed/1 getSuppressed/0";
        jdk("java.lang.Object", "", "", "equals/1 hashCode/0 toString/0 getClass/0 clone/0 finalize/0 notify/0 "
                + "notifyAll/0 wait/0 wait/1 wait/2");
        jdk("java.io.Serializable", "", "", "");
        jdk("java.lang.Cloneable", "", "", "");
        jdk("java.util.RandomAccess", "", "", "");
        jdk("java.lang.Comparable", "", "", "compareTo/1");
        jdk("java.lang.AutoCloseable", "", "", "close/0");
        jdk("java.io.Closeable", "java.lang.AutoCloseable", "", "close/0");
        jdk("java.io.Flushable", "", "", "flush/0");
        jdk("java.lang.Runnable", "", "", "run/0");
        jdk("java.lang.Iterable", "", "", "iterator/0 forEach/1 spliterator/0");
        jdk("java.util.Iterator", "", "", "hasNext/0 next/0 remove/0 forEachRemaining/1");
        jdk("java.util.Comparator", "", "", "compare/2 equals/1 reversed/0 thenComparing/1 thenComparing/2 "
                + "thenComparingInt/1 thenComparingLong/1 thenComparingDouble/1 reverseOrder/0 naturalOrder/0 "
                + "nullsFirst/1 nullsLast/1 comparing/1 comparing/2 comparingInt/1 comparingLong/1 comparingDouble/1");
        jdk("java.lang.CharSequence", "", "", "length/0 charAt/1 subSequence/2 toString/0 chars/0 codePoints/0 "
                + "isEmpty/0 compare/2");
        jdk("java.lang.Throwable", "java.io.Serializable", "", throwable);
        for (String name : new String[] {"Exception", "RuntimeException", "IllegalArgumentException",
                "IllegalStateException", "UnsupportedOperationException", "Error", "NumberFormatException"}) {
            jdk("java.lang." + name, "java.lang.Throwable", "", "");
        }
        jdk("java.io.IOException", "java.lang.Throwable", "", "");
        jdk("java.io.UncheckedIOException", "java.lang.Throwable", "", "");
        jdk("java.lang.Number", "java.io.Serializable", "", "intValue/0 longValue/0 floatValue/0 doubleValue/0 "
                + "byteValue/0 shortValue/0");
        jdk("java.lang.Enum", "java.lang.Comparable java.io.Serializable", "", "name/0 ordinal/0 compareTo/1 "
                + "valueOf/1 valueOf/2 values/0 getDeclaringClass/0 describeConstable/0 equals/1 hashCode/0 "
                + "toString/0 clone/0 finalize/0");
        jdk("java.lang.Record", "", "", "equals/1 hashCode/0 toString/0");
        jdk("java.lang.annotation.Annotation", "", "", "annotationType/0 equals/1 hashCode/0 toString/0");
        jdk("java.lang.Appendable", "", "", "append/1 append/3");
        jdk("java.lang.reflect.Type", "", "", "getTypeName/0");
        jdk("java.lang.reflect.ParameterizedType", "java.lang.reflect.Type", "",
                "getActualTypeArguments/0 getRawType/0 getOwnerType/0");
        jdk("java.lang.reflect.WildcardType", "java.lang.reflect.Type", "", "getUpperBounds/0 getLowerBounds/0");
        jdk("java.lang.reflect.GenericArrayType", "java.lang.reflect.Type", "", "getGenericComponentType/0");
        String collection = "size/0 isEmpty/0 contains/1 iterator/0 toArray/0 toArray/1 add/1 remove/1 "
                + "containsAll/1 addAll/1 removeAll/1 removeIf/1 retainAll/1 clear/0 equals/1 hashCode/0 "
                + "spliterator/0 stream/0 parallelStream/0";
        jdk("java.util.Collection", "java.lang.Iterable", "", collection);
        jdk("java.util.AbstractCollection", "java.util.Collection", "", "toString/0");
        jdk("java.util.Set", "java.util.Collection", "", "");
        jdk("java.util.AbstractSet", "java.util.AbstractCollection java.util.Set", "", "");
        jdk("java.util.Map", "", "Entry", "size/0 isEmpty/0 containsKey/1 containsValue/1 get/1 put/2 remove/1 "
                + "putAll/1 clear/0 keySet/0 values/0 entrySet/0 equals/1 hashCode/0 getOrDefault/2 forEach/1 "
                + "replaceAll/1 putIfAbsent/2 remove/2 replace/2 replace/3 computeIfAbsent/2 computeIfPresent/2 "
                + "compute/2 merge/3");
        jdk("java.util.AbstractMap", "java.util.Map", "SimpleEntry SimpleImmutableEntry", "toString/0 clone/0");
        jdk("java.util.Map.Entry", "", "", "getKey/0 getValue/0 setValue/1 equals/1 hashCode/0");
        jdk("java.util.function.Supplier", "", "", "get/0");
        jdk("java.util.function.Function", "", "", "apply/1 andThen/1 compose/1 identity/0");
        jdk("java.util.function.BiFunction", "", "", "apply/2 andThen/1");
        jdk("java.util.function.Predicate", "", "", "test/1 and/1 or/1 negate/0 not/1 isEqual/1");
        jdk("java.util.function.Consumer", "", "", "accept/1 andThen/1");
    }

    // ---------------------------------------------------------------- state

    private final Path root;
    private final List<FileInfo> files = new ArrayList<>();
    private final Map<String, TypeInfo> byFqn = new HashMap<>();
    private final Map<Node, TypeInfo> typeOf = new IdentityHashMap<>();
    private final Map<Node, String> defQualname = new IdentityHashMap<>();
    private final Map<Node, FileInfo> fileOfCu = new IdentityHashMap<>();
    private final List<Definition> rawDefinitions = new ArrayList<>();

    Oracle(Path root) {
        this.root = root;
    }

    // ---------------------------------------------------------------- pass 1: definitions and types

    void parseAll() throws IOException {
        List<Path> paths;
        try (Stream<Path> walk = Files.walk(root)) {
            paths = walk.filter(p -> p.toString().endsWith(".java") && Files.isRegularFile(p))
                    .filter(p -> !root.relativize(p).toString().replace('\\', '/').startsWith(".git/"))
                    .sorted()
                    .collect(Collectors.toList());
        }
        ParserConfiguration config = new ParserConfiguration()
                .setLanguageLevel(ParserConfiguration.LanguageLevel.JAVA_21)
                .setAttributeComments(true);
        JavaParser parser = new JavaParser(config);
        for (Path p : paths) {
            String rel = root.relativize(p).toString().replace('\\', '/');
            String text = new String(Files.readAllBytes(p), StandardCharsets.UTF_8);
            ParseResult<CompilationUnit> result = parser.parse(text);
            if (!result.isSuccessful() || result.getResult().isEmpty()) {
                // A file the parser cannot read fully gives no facts rather than partial ones.
                System.err.println("oracle: skipping " + rel + ": " + result.getProblems());
                continue;
            }
            FileInfo file = new FileInfo(rel, result.getResult().get());
            files.add(file);
            fileOfCu.put(file.cu, file);
            collect(file, file.cu, "", null, null, false);
        }
    }

    /**
     * Walks the tree in source order. {@code prefix} is the qualname of the innermost named
     * definition, {@code type} the innermost type, {@code inAnonymous} whether an anonymous body
     * lies between: definitions there have no name of their own and are not emitted.
     */
    private void collect(FileInfo file, Node node, String prefix, TypeInfo type, String fqnPrefix,
                         boolean inAnonymous) {
        for (Node child : childrenInOrder(node)) {
            if (child instanceof TypeDeclaration<?> decl) {
                String name = decl.getNameAsString();
                String qual = inAnonymous ? null : join(prefix, name);
                boolean member = node == file.cu || node instanceof TypeDeclaration<?>
                        || node instanceof ObjectCreationExpr || node instanceof EnumConstantDeclaration;
                String fqn = member && fqnPrefix != null ? join(fqnPrefix, name) : null;
                if (node == file.cu) {
                    fqn = join(file.pkg, name);
                }
                TypeInfo info = new TypeInfo(decl, file, name, qual, fqn, typeKind(decl));
                register(info, type, member);
                if (decl instanceof ClassOrInterfaceDeclaration c) {
                    c.getTypeParameters().forEach(t -> info.typeParams.add(t.getNameAsString()));
                } else if (decl instanceof RecordDeclaration r) {
                    r.getTypeParameters().forEach(t -> info.typeParams.add(t.getNameAsString()));
                    for (Parameter p : r.getParameters()) {
                        info.fields.put(p.getNameAsString(), new FieldInfo(p.getType(), decl));
                    }
                }
                if (!inAnonymous) {
                    define(file, decl, qual, name, info.kind, null);
                }
                collect(file, child, inAnonymous ? prefix : qual, info, fqn, inAnonymous);
            } else if (child instanceof CallableDeclaration<?> callable
                    && (child instanceof MethodDeclaration || child instanceof ConstructorDeclaration)) {
                String name = callable.getNameAsString();
                if (type != null) {
                    type.methods.computeIfAbsent(name, k -> new ArrayList<>()).add(methodInfo(callable, type));
                }
                String qual = join(prefix, name);
                if (!inAnonymous) {
                    define(file, child, qual, name, "method", type != null && type.named() ? type.qualname : null);
                }
                collect(file, child, inAnonymous ? prefix : qual, type, null, inAnonymous);
            } else if (child instanceof FieldDeclaration field) {
                if (type != null) {
                    for (VariableDeclarator v : field.getVariables()) {
                        type.fields.put(v.getNameAsString(), new FieldInfo(v.getType(), field));
                    }
                }
                collect(file, child, prefix, type, null, inAnonymous);
            } else if (child instanceof EnumConstantDeclaration constant) {
                if (type != null) {
                    type.fields.put(constant.getNameAsString(), new FieldInfo(null, constant));
                }
                if (constant.getClassBody().isNonEmpty()) {
                    TypeInfo info = new TypeInfo(constant, file, "", null, null, "class");
                    info.supers = new ArrayList<>(List.of(type));
                    typeOf.put(constant, info);
                    collect(file, child, prefix, info, null, true);
                } else {
                    collect(file, child, prefix, type, null, inAnonymous);
                }
            } else if (child instanceof ObjectCreationExpr creation && creation.getAnonymousClassBody().isPresent()) {
                TypeInfo info = new TypeInfo(creation, file, "", null, null, "class");
                typeOf.put(creation, info);
                collect(file, child, prefix, info, null, true);
            } else {
                collect(file, child, prefix, type, null, inAnonymous);
            }
        }
    }

    private void register(TypeInfo info, TypeInfo enclosing, boolean member) {
        typeOf.put(info.node, info);
        if (member && enclosing != null) {
            enclosing.memberTypes.putIfAbsent(info.name, info);
        }
        if (info.fqn != null) {
            byFqn.putIfAbsent(info.fqn, info);
        }
    }

    private static String typeKind(TypeDeclaration<?> decl) {
        if (decl instanceof ClassOrInterfaceDeclaration c) {
            return c.isInterface() ? "interface" : "class";
        }
        if (decl instanceof EnumDeclaration) {
            return "enum";
        }
        if (decl instanceof AnnotationDeclaration) {
            return "interface";
        }
        return "class"; // records
    }

    private MethodInfo methodInfo(CallableDeclaration<?> callable, TypeInfo owner) {
        Set<String> typeVars = new HashSet<>();
        callable.getTypeParameters().forEach(t -> typeVars.add(t.getNameAsString()));
        for (Node n = callable; n != null; n = n.getParentNode().orElse(null)) {
            TypeInfo t = typeOf.get(n);
            if (t != null) {
                typeVars.addAll(t.typeParams);
            }
        }
        List<String> params = new ArrayList<>();
        boolean varargs = false;
        for (Parameter p : callable.getParameters()) {
            String erased = erase(p.getType().asString());
            params.add(typeVars.contains(erased.replace("[]", "")) ? "*" : erased + (p.isVarArgs() ? "[]" : ""));
            varargs = p.isVarArgs();
        }
        return new MethodInfo(callable.getNameAsString(), params, varargs);
    }

    private static String erase(String type) {
        String out = type;
        String previous;
        do {
            previous = out;
            out = out.replaceAll("<[^<>]*>", "");
        } while (!out.equals(previous));
        out = out.replaceAll("@\\S+\\s+", "").replace("final ", "").replace(" ", "");
        int dot = out.lastIndexOf('.');
        return dot >= 0 ? out.substring(dot + 1) : out;
    }

    private void define(FileInfo file, Node node, String qual, String name, String kind, String container) {
        defQualname.put(node, qual);
        TokenRange range = node.getTokenRange().orElseThrow();
        String text = range.toString();
        rawDefinitions.add(new Definition(file.path, qual, name, kind, container, node.getBegin().get().line,
                node.getEnd().get().line, node.getBegin().get().column, doc(node), signature(node),
                sha1(text), isTest(file.path)));
    }

    private static boolean isTest(String path) {
        String name = path.substring(path.lastIndexOf('/') + 1);
        return path.startsWith("src/test/") || path.contains("/src/test/")
                || name.endsWith("Test.java") || name.endsWith("Tests.java");
    }

    /** Children in source order (JavaParser lists some children by field, not by position). */
    private static List<Node> childrenInOrder(Node node) {
        List<Node> children = new ArrayList<>(node.getChildNodes());
        children.sort((a, b) -> {
            if (a.getBegin().isEmpty() || b.getBegin().isEmpty()) {
                return 0;
            }
            return a.getBegin().get().compareTo(b.getBegin().get());
        });
        return children;
    }

    private static String join(String prefix, String name) {
        return prefix == null || prefix.isEmpty() ? name : prefix + "." + name;
    }

    // ---------------------------------------------------------------- signatures and docs

    private static String signature(Node node) {
        JavaToken stop = null;
        if (node instanceof CallableDeclaration<?>) {
            Node body = node instanceof MethodDeclaration m ? m.getBody().orElse(null)
                    : ((ConstructorDeclaration) node).getBody();
            if (body != null) {
                stop = body.getTokenRange().get().getBegin();
            }
        }
        StringBuilder out = new StringBuilder();
        int depth = 0;
        for (JavaToken token : node.getTokenRange().get()) {
            if (token == stop) {
                break;
            }
            String text = token.getText();
            if (stop == null && depth == 0 && (text.equals("{") || text.equals(";"))) {
                break;
            }
            if (text.equals("(")) {
                depth++;
            } else if (text.equals(")")) {
                depth--;
            }
            if (token.getCategory().isComment()) {
                continue;
            }
            out.append(token.getCategory().isWhitespace() ? " " : text);
        }
        return out.toString().replaceAll("\\s+", " ").replace("( ", "(").replace(" )", ")").trim();
    }

    private static final Pattern BLOCK_TAG = Pattern.compile(
            "(?i)^(p|pre|ul|ol|li|table|dl|dt|dd|h[1-6]|blockquote|div|hr)$");
    private static final Pattern HTML_TAG = Pattern.compile("</?\\s*([a-zA-Z][a-zA-Z0-9]*)\\b[^>]*>");

    /** First paragraph of a declaration's Javadoc as plain text. */
    static String doc(Node node) {
        Comment comment = node.getComment().orElse(null);
        if (!(comment instanceof JavadocComment)) {
            return "";
        }
        List<String> lines = new ArrayList<>();
        for (String line : comment.getContent().split("\r\n|\r|\n", -1)) {
            String stripped = line.replaceFirst("^\\s*\\*+ ?", "");
            if (line.trim().isEmpty() || line.trim().equals("*")) {
                stripped = "";
            }
            if (stripped.trim().startsWith("@")) {
                break; // block tags end the description
            }
            lines.add(stripped);
        }
        String text = String.join("\n", lines);
        StringBuilder out = new StringBuilder();
        int i = 0;
        while (i < text.length()) {
            char c = text.charAt(i);
            if (c == '{' && text.startsWith("{@", i)) {
                int end = matchingBrace(text, i);
                out.append(inlineTag(text.substring(i + 2, end)));
                i = end + 1;
            } else if (c == '<' && text.startsWith("<!--", i)) {
                int end = text.indexOf("-->", i);
                i = end < 0 ? text.length() : end + 3;
            } else if (c == '<') {
                Matcher m = HTML_TAG.matcher(text).region(i, text.length());
                if (m.lookingAt()) {
                    if (BLOCK_TAG.matcher(m.group(1)).matches() && !out.toString().isBlank()) {
                        break; // a block element starts the next paragraph
                    }
                    if (m.group(1).equalsIgnoreCase("br")) {
                        out.append(' ');
                    }
                    i = m.end();
                } else {
                    out.append(c);
                    i++;
                }
            } else if (c == '\n' && !out.toString().isBlank() && blankLineAt(text, i + 1)) {
                break;
            } else {
                out.append(c);
                i++;
            }
        }
        return entities(out.toString()).replaceAll("\\s+", " ").trim();
    }

    private static boolean blankLineAt(String text, int from) {
        int nl = text.indexOf('\n', from);
        String line = nl < 0 ? text.substring(from) : text.substring(from, nl);
        return line.isBlank() && nl >= 0;
    }

    private static int matchingBrace(String text, int open) {
        int depth = 0;
        for (int i = open; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '{') {
                depth++;
            } else if (c == '}' && --depth == 0) {
                return i;
            }
        }
        return text.length();
    }

    private static String inlineTag(String body) {
        String[] parts = body.split("\\s+", 2);
        String tag = parts[0];
        String rest = parts.length > 1 ? parts[1].trim() : "";
        switch (tag) {
            case "code":
            case "literal":
                return rest.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"); // decoded later
            case "link":
            case "linkplain":
            case "value": {
                String[] ref = splitReference(rest);
                if (!ref[1].isEmpty()) {
                    return stripTags(ref[1]);
                }
                String target = ref[0].startsWith("#") ? ref[0].substring(1) : ref[0].replace('#', '.');
                return target;
            }
            case "inheritDoc":
                return "";
            default:
                return stripTags(rest);
        }
    }

    /** A {@code @link} body: the reference (which may hold a parenthesised parameter list) and the label. */
    private static String[] splitReference(String body) {
        int depth = 0;
        for (int i = 0; i < body.length(); i++) {
            char c = body.charAt(i);
            if (c == '(') {
                depth++;
            } else if (c == ')') {
                depth--;
            } else if (Character.isWhitespace(c) && depth == 0) {
                return new String[] {body.substring(0, i), body.substring(i).trim()};
            }
        }
        return new String[] {body, ""};
    }

    private static String stripTags(String text) {
        return text.replaceAll("<[^>]*>", "");
    }

    private static String entities(String text) {
        Matcher m = Pattern.compile("&(#x?[0-9a-fA-F]+|[a-zA-Z]+);").matcher(text);
        StringBuilder out = new StringBuilder();
        while (m.find()) {
            String e = m.group(1);
            String rep;
            switch (e) {
                case "lt": rep = "<"; break;
                case "gt": rep = ">"; break;
                case "amp": rep = "&"; break;
                case "quot": rep = "\""; break;
                case "apos": rep = "'"; break;
                case "nbsp": rep = " "; break;
                default:
                    if (e.startsWith("#x") || e.startsWith("#X")) {
                        rep = new String(Character.toChars(Integer.parseInt(e.substring(2), 16)));
                    } else if (e.startsWith("#")) {
                        rep = new String(Character.toChars(Integer.parseInt(e.substring(1))));
                    } else {
                        rep = m.group();
                    }
            }
            m.appendReplacement(out, Matcher.quoteReplacement(rep));
        }
        m.appendTail(out);
        return out.toString();
    }

    private static String sha1(String text) {
        try {
            byte[] digest = MessageDigest.getInstance("SHA-1").digest(text.getBytes(StandardCharsets.UTF_8));
            StringBuilder out = new StringBuilder();
            for (byte b : digest) {
                out.append(String.format("%02x", b));
            }
            return out.toString();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    // ---------------------------------------------------------------- type names

    private FileInfo fileOf(Node node) {
        return fileOfCu.get(node.findCompilationUnit().orElseThrow());
    }

    /** The type a name denotes at {@code context}: TypeInfo, Jdk, UNKNOWN, or NOT_FOUND. */
    Object resolveType(String written, Node context) {
        String name = erase0(written);
        if (name.isEmpty() || name.contains("[")) {
            return UNKNOWN;
        }
        String[] parts = name.split("\\.");
        Object head = resolveSimpleType(parts[0], context);
        int i = 1;
        if (head == NOT_FOUND) {
            // A qualified name: the longest package prefix naming a type of the tree.
            head = UNKNOWN;
            for (int cut = parts.length; cut >= 2; cut--) {
                TypeInfo t = byFqn.get(String.join(".", Arrays.copyOfRange(parts, 0, cut)));
                if (t != null) {
                    head = t;
                    i = cut;
                    break;
                }
            }
        }
        for (; i < parts.length && head instanceof TypeInfo t; i++) {
            head = memberType(t, parts[i], new HashSet<>());
            if (head == NOT_FOUND) {
                return UNKNOWN;
            }
        }
        return i < parts.length ? UNKNOWN : head;
    }

    /** A type name without type arguments or annotations, dots kept. */
    private static String erase0(String type) {
        String out = type;
        String previous;
        do {
            previous = out;
            out = out.replaceAll("<[^<>]*>", "");
        } while (!out.equals(previous));
        return out.replaceAll("@\\S+\\s+", "").replace(" ", "");
    }

    private Object resolveSimpleType(String name, Node context) {
        Node prev = context;
        for (Node n = context.getParentNode().orElse(null); n != null; prev = n, n = n.getParentNode().orElse(null)) {
            if (n instanceof CallableDeclaration<?> c) {
                for (TypeParameter tp : c.getTypeParameters()) {
                    if (tp.getNameAsString().equals(name)) {
                        return UNKNOWN;
                    }
                }
            }
            if (n instanceof BlockStmt block) {
                for (Statement s : block.getStatements()) {
                    TypeDeclaration<?> local = s instanceof LocalClassDeclarationStmt l ? l.getClassDeclaration()
                            : s instanceof LocalRecordDeclarationStmt r ? r.getRecordDeclaration() : null;
                    if (local != null && local.getNameAsString().equals(name)) {
                        return typeOf.get(local);
                    }
                }
            }
            TypeInfo t = typeOf.get(n);
            if (t != null && insideBody(t, prev)) {
                if (t.typeParams.contains(name)) {
                    return UNKNOWN;
                }
                if (t.name.equals(name) && t.named()) {
                    return t;
                }
                Object member = memberType(t, name, new HashSet<>());
                if (member != NOT_FOUND) {
                    return member;
                }
            }
        }
        FileInfo file = fileOf(context);
        for (TypeDeclaration<?> top : file.cu.getTypes()) {
            if (top.getNameAsString().equals(name)) {
                return typeOf.get(top);
            }
        }
        String imported = file.singleImports.get(name);
        if (imported != null) {
            return known(imported);
        }
        TypeInfo samePackage = byFqn.get(join(file.pkg, name));
        if (samePackage != null) {
            return samePackage;
        }
        List<Object> found = new ArrayList<>();
        for (String pkg : file.onDemandImports) {
            Object k = byFqn.containsKey(pkg + "." + name) ? byFqn.get(pkg + "." + name) : JDK.get(pkg + "." + name);
            if (k != null) {
                found.add(k);
            }
        }
        if (JDK.containsKey("java.lang." + name)) {
            found.add(JDK.get("java.lang." + name));
        }
        if (found.size() == 1) {
            return found.get(0);
        }
        return found.isEmpty() ? NOT_FOUND : UNKNOWN;
    }

    private Object known(String fqn) {
        TypeInfo t = byFqn.get(fqn);
        if (t != null) {
            return t;
        }
        Jdk j = JDK.get(fqn);
        return j != null ? j : UNKNOWN;
    }

    /** Whether {@code child} (a child of the type's node) lies in the type's body, where its members are in scope. */
    private static boolean insideBody(TypeInfo t, Node child) {
        if (t.node instanceof ObjectCreationExpr creation) {
            return child instanceof BodyDeclaration<?> && creation.getAnonymousClassBody().isPresent()
                    && creation.getAnonymousClassBody().get().stream().anyMatch(b -> b == child);
        }
        if (t.node instanceof EnumConstantDeclaration constant) {
            return constant.getClassBody().stream().anyMatch(b -> b == child);
        }
        return child instanceof BodyDeclaration<?>;
    }

    /** A member type named {@code name} of {@code t}, declared or inherited. */
    private Object memberType(TypeInfo t, String name, Set<TypeInfo> seen) {
        if (!seen.add(t)) {
            return NOT_FOUND;
        }
        TypeInfo own = t.memberTypes.get(name);
        if (own != null) {
            return own;
        }
        Object found = NOT_FOUND;
        for (Object s : supers(t)) {
            Object r;
            if (s instanceof TypeInfo st) {
                r = memberType(st, name, seen);
            } else if (s instanceof Jdk j) {
                r = jdkHasMemberType(j, name, new HashSet<>()) ? UNKNOWN : NOT_FOUND;
            } else {
                r = UNKNOWN; // an opaque supertype may declare it
            }
            if (r != NOT_FOUND) {
                if (found != NOT_FOUND && found != r) {
                    return UNKNOWN;
                }
                found = r;
            }
        }
        return found;
    }

    private boolean jdkHasMemberType(Jdk j, String name, Set<String> seen) {
        if (!seen.add(j.fqn())) {
            return false;
        }
        if (j.memberTypes().contains(name)) {
            return true;
        }
        for (String s : j.supers()) {
            Jdk sj = JDK.get(s);
            if (sj != null && jdkHasMemberType(sj, name, seen)) {
                return true;
            }
        }
        return false;
    }

    /** Direct supertypes, the implicit ones included. */
    List<Object> supers(TypeInfo t) {
        if (t.supers != null) {
            return t.supers;
        }
        if (t.resolvingSupers) {
            return List.of(UNKNOWN); // a cycle: treat as unknowable
        }
        t.resolvingSupers = true;
        List<Object> out = new ArrayList<>();
        Node context = t.node;
        List<ClassOrInterfaceType> written = new ArrayList<>();
        if (t.node instanceof ClassOrInterfaceDeclaration c) {
            written.addAll(c.getExtendedTypes());
            written.addAll(c.getImplementedTypes());
            if (c.isInterface() || c.getExtendedTypes().isEmpty()) {
                out.add(JDK.get("java.lang.Object"));
            }
        } else if (t.node instanceof EnumDeclaration e) {
            written.addAll(e.getImplementedTypes());
            out.add(JDK.get("java.lang.Enum"));
        } else if (t.node instanceof RecordDeclaration r) {
            written.addAll(r.getImplementedTypes());
            out.add(JDK.get("java.lang.Record"));
        } else if (t.node instanceof AnnotationDeclaration) {
            out.add(JDK.get("java.lang.annotation.Annotation"));
        } else if (t.node instanceof ObjectCreationExpr creation) {
            written.add(creation.getType());
            out.add(JDK.get("java.lang.Object"));
        }
        for (ClassOrInterfaceType type : written) {
            // Names in a type's header are resolved where the type is declared, not inside its body.
            Object r = resolveType(type.asString(), context);
            out.add(r == NOT_FOUND ? UNKNOWN : r);
        }
        t.supers = out;
        t.resolvingSupers = false;
        return out;
    }

    private boolean isSubtype(Object a, TypeInfo b, Set<Object> seen) {
        if (a == b) {
            return true;
        }
        if (!(a instanceof TypeInfo ta) || !seen.add(a)) {
            return false;
        }
        for (Object s : supers(ta)) {
            if (isSubtype(s, b, seen)) {
                return true;
            }
        }
        return false;
    }

    // ---------------------------------------------------------------- members

    /**
     * The one type whose declaration of {@code name} a call on {@code t} with {@code arity}
     * arguments binds to, when the tree shows it for certain.
     */
    Lookup method(Object type, String name, int arity) {
        if (!(type instanceof TypeInfo t)) {
            return Lookup.UNCERTAIN;
        }
        Map<TypeInfo, List<MethodInfo>> declared = new LinkedHashMap<>();
        List<Integer> jdkArities = new ArrayList<>();
        boolean[] opaque = {false};
        gatherMethods(t, name, declared, jdkArities, opaque, Collections.newSetFromMap(new IdentityHashMap<>()));
        if (opaque[0]) {
            return Lookup.UNCERTAIN;
        }
        if (declared.isEmpty()) {
            return jdkArities.isEmpty() ? Lookup.NONE : Lookup.UNCERTAIN;
        }
        // The binding declaration must belong to a type below every other declaring type and cover
        // (override) all their overloads; otherwise overload resolution could pick another one.
        for (Map.Entry<TypeInfo, List<MethodInfo>> candidate : declared.entrySet()) {
            TypeInfo owner = candidate.getKey();
            List<MethodInfo> own = candidate.getValue();
            boolean covers = true;
            for (Map.Entry<TypeInfo, List<MethodInfo>> other : declared.entrySet()) {
                if (other.getKey() == owner) {
                    continue;
                }
                if (!isSubtype(owner, other.getKey(), new HashSet<>())) {
                    covers = false;
                    break;
                }
                for (MethodInfo m : other.getValue()) {
                    if (own.stream().noneMatch(o -> o.sameParams(m))) {
                        covers = false;
                    }
                }
            }
            for (int a : jdkArities) {
                if (own.stream().noneMatch(o -> !o.varargs() && o.params().size() == a)) {
                    covers = false;
                }
            }
            if (covers && own.stream().anyMatch(o -> o.accepts(arity))) {
                return new Lookup(Certainty.FOUND, owner);
            }
        }
        return Lookup.UNCERTAIN;
    }

    private void gatherMethods(TypeInfo t, String name, Map<TypeInfo, List<MethodInfo>> declared,
                               List<Integer> jdkArities, boolean[] opaque, Set<Object> seen) {
        if (!seen.add(t)) {
            return;
        }
        List<MethodInfo> own = t.methods.get(name);
        if (own != null) {
            declared.put(t, own);
        }
        for (Object s : supers(t)) {
            if (s instanceof TypeInfo st) {
                gatherMethods(st, name, declared, jdkArities, opaque, seen);
            } else if (s instanceof Jdk j) {
                gatherJdk(j, name, jdkArities, seen);
            } else {
                opaque[0] = true;
            }
        }
    }

    private void gatherJdk(Jdk j, String name, List<Integer> arities, Set<Object> seen) {
        if (!seen.add(j)) {
            return;
        }
        Set<Integer> a = j.methods().get(name);
        if (a != null) {
            arities.addAll(a);
        }
        for (String s : j.supers()) {
            Jdk sj = JDK.get(s);
            if (sj != null) {
                gatherJdk(sj, name, arities, seen);
            }
        }
        if (!j.fqn().equals("java.lang.Object")) {
            gatherJdk(JDK.get("java.lang.Object"), name, arities, seen);
        }
    }

    /** A field named {@code name} of {@code t}, declared or inherited. */
    VarLookup field(TypeInfo t, String name, Set<TypeInfo> seen) {
        if (!seen.add(t)) {
            return VarLookup.NONE;
        }
        FieldInfo own = t.fields.get(name);
        if (own != null) {
            if (own.type() == null) { // an enum constant: typed by its enum
                return new VarLookup(Certainty.FOUND, null, own.context());
            }
            return new VarLookup(Certainty.FOUND, own.type(), own.context());
        }
        VarLookup found = VarLookup.NONE;
        for (Object s : supers(t)) {
            VarLookup r;
            if (s instanceof TypeInfo st) {
                r = field(st, name, seen);
            } else if (s instanceof Jdk) {
                r = VarLookup.NONE; // the JDK types listed here have no fields a subclass sees by name
            } else {
                return VarLookup.UNCERTAIN;
            }
            if (r.how() == Certainty.UNCERTAIN || (r.how() == Certainty.FOUND && found.how() == Certainty.FOUND)) {
                return VarLookup.UNCERTAIN;
            }
            if (r.how() == Certainty.FOUND) {
                found = r;
            }
        }
        return found;
    }

    /** The type a variable's declaration gives it, or UNKNOWN. */
    private Object typeOfVariable(VarLookup v) {
        if (v.how() != Certainty.FOUND) {
            return UNKNOWN;
        }
        if (v.type() == null) {
            if (v.context() instanceof EnumConstantDeclaration constant) {
                Node parent = constant.getParentNode().orElse(null);
                TypeInfo e = parent == null ? null : typeOf.get(parent);
                return e != null ? e : UNKNOWN;
            }
            return UNKNOWN;
        }
        if (v.type().isVarType() || v.type().isUnknownType() || v.type().isUnionType()) {
            return UNKNOWN;
        }
        Object r = resolveType(v.type().asString(), v.context());
        return r == NOT_FOUND ? UNKNOWN : r;
    }

    // ---------------------------------------------------------------- variables in scope

    /** The variable {@code name} denotes at {@code context}: a local, a parameter or a field. */
    VarLookup variable(String name, Node context) {
        Node prev = context;
        for (Node n = context.getParentNode().orElse(null); n != null; prev = n, n = n.getParentNode().orElse(null)) {
            if (n instanceof BlockStmt block) {
                for (Statement s : block.getStatements()) {
                    if (s == prev) {
                        break;
                    }
                    VarLookup v = declaredIn(s, name);
                    if (v != null) {
                        return v;
                    }
                }
            } else if (n instanceof ForStmt f) {
                for (Expression e : f.getInitialization()) {
                    VarLookup v = declaredIn(e, name);
                    if (v != null) {
                        return v;
                    }
                }
            } else if (n instanceof ForEachStmt f && f.getBody() == prev) {
                VarLookup v = declaredIn(f.getVariable(), name);
                if (v != null) {
                    return v;
                }
            } else if (n instanceof TryStmt t && t.getTryBlock() == prev) {
                for (Expression e : t.getResources()) {
                    VarLookup v = declaredIn(e, name);
                    if (v != null) {
                        return v;
                    }
                }
            } else if (n instanceof CatchClause c && c.getBody() == prev) {
                if (c.getParameter().getNameAsString().equals(name)) {
                    return new VarLookup(Certainty.FOUND, c.getParameter().getType(), c.getParameter());
                }
            } else if (n instanceof LambdaExpr lambda) {
                for (Parameter p : lambda.getParameters()) {
                    if (p.getNameAsString().equals(name)) {
                        return new VarLookup(Certainty.FOUND, p.getType(), p);
                    }
                }
            } else if (n instanceof CallableDeclaration<?> callable) {
                for (Parameter p : callable.getParameters()) {
                    if (p.getNameAsString().equals(name)) {
                        return new VarLookup(Certainty.FOUND, p.getType(), p);
                    }
                }
            }
            TypeInfo t = typeOf.get(n);
            if (t != null && insideBody(t, prev)) {
                // Names declared anywhere in the member just left (flow-scoped patterns, switch
                // blocks) could be what the name means: the walk above does not model them all. A
                // member type's body is its own scope and is not searched.
                if (!(prev instanceof TypeDeclaration<?>) && declaresAnywhere(prev, name)) {
                    return VarLookup.UNCERTAIN;
                }
                VarLookup f = field(t, name, new HashSet<>());
                if (f.how() != Certainty.NONE) {
                    return f;
                }
            }
        }
        FileInfo file = fileOf(context);
        if (file.staticSingle.containsKey(name)) {
            return VarLookup.UNCERTAIN;
        }
        for (String owner : file.staticOnDemand) {
            TypeInfo t = byFqn.get(owner);
            if (t == null || field(t, name, new HashSet<>()).how() != Certainty.NONE) {
                return VarLookup.UNCERTAIN;
            }
        }
        return VarLookup.NONE;
    }

    private static VarLookup declaredIn(Node node, String name) {
        VariableDeclarationExpr decl = null;
        if (node instanceof ExpressionStmt es && es.getExpression() instanceof VariableDeclarationExpr v) {
            decl = v;
        } else if (node instanceof VariableDeclarationExpr v) {
            decl = v;
        }
        if (decl == null) {
            return null;
        }
        for (VariableDeclarator v : decl.getVariables()) {
            if (v.getNameAsString().equals(name)) {
                return new VarLookup(Certainty.FOUND, v.getType(), v);
            }
        }
        return null;
    }

    private static boolean declaresAnywhere(Node scope, String name) {
        if (scope instanceof FieldDeclaration) {
            // A field's own declarators are fields, not locals; look only inside initialisers.
            for (VariableDeclarator v : ((FieldDeclaration) scope).getVariables()) {
                if (v.getInitializer().isPresent() && declaresAnywhere(v.getInitializer().get(), name)) {
                    return true;
                }
            }
            return false;
        }
        for (VariableDeclarator v : scope.findAll(VariableDeclarator.class)) {
            if (v.getNameAsString().equals(name) && !(v.getParentNode().orElse(null) instanceof FieldDeclaration)) {
                return true;
            }
        }
        for (Parameter p : scope.findAll(Parameter.class)) {
            if (p.getNameAsString().equals(name)) {
                return true;
            }
        }
        for (TypePatternExpr p : scope.findAll(TypePatternExpr.class)) {
            if (p.getNameAsString().equals(name)) {
                return true;
            }
        }
        return false;
    }

    // ---------------------------------------------------------------- pass 2: calls

    /** What an expression left of a dot denotes: a value of a type, a type, or a package prefix. */
    record Receiver(Object type, boolean isType, String packagePrefix) {
        static final Receiver UNKNOWN_RECEIVER = new Receiver(UNKNOWN, false, null);
    }

    Receiver receiver(Expression e) {
        if (e instanceof EnclosedExpr enclosed) {
            return receiver(enclosed.getInner());
        }
        if (e instanceof CastExpr cast) {
            Object r = resolveType(cast.getType().asString(), cast);
            return new Receiver(r == NOT_FOUND ? UNKNOWN : r, false, null);
        }
        if (e instanceof ThisExpr self) {
            TypeInfo t = self.getTypeName().isPresent()
                    ? enclosingNamed(self, self.getTypeName().get().asString()) : innermostType(self);
            return new Receiver(t == null ? UNKNOWN : t, false, null);
        }
        if (e instanceof ObjectCreationExpr creation) {
            if (creation.getScope().isPresent()) {
                return Receiver.UNKNOWN_RECEIVER; // outer.new Inner(): the inner type is named relative to outer
            }
            if (creation.getAnonymousClassBody().isPresent()) {
                return new Receiver(typeOf.get(creation), false, null);
            }
            Object r = resolveType(creation.getType().asString(), creation);
            return new Receiver(r == NOT_FOUND ? UNKNOWN : r, false, null);
        }
        if (e instanceof NameExpr name) {
            String id = name.getNameAsString();
            VarLookup v = variable(id, name);
            if (v.how() == Certainty.FOUND) {
                return new Receiver(typeOfVariable(v), false, null);
            }
            if (v.how() == Certainty.UNCERTAIN) {
                return Receiver.UNKNOWN_RECEIVER;
            }
            Object t = resolveSimpleType(id, name);
            if (t == NOT_FOUND) {
                return new Receiver(UNKNOWN, false, id);
            }
            return new Receiver(t, true, null);
        }
        if (e instanceof FieldAccessExpr access) {
            String id = access.getNameAsString();
            Receiver left = receiver(access.getScope());
            if (left.packagePrefix() != null) {
                String fqn = left.packagePrefix() + "." + id;
                TypeInfo t = byFqn.get(fqn);
                return t != null ? new Receiver(t, true, null) : new Receiver(UNKNOWN, false, fqn);
            }
            if (!(left.type() instanceof TypeInfo t)) {
                return Receiver.UNKNOWN_RECEIVER;
            }
            VarLookup f = field(t, id, new HashSet<>());
            if (f.how() == Certainty.FOUND) {
                return new Receiver(typeOfVariable(f), false, null);
            }
            if (f.how() == Certainty.UNCERTAIN || !left.isType()) {
                return Receiver.UNKNOWN_RECEIVER;
            }
            Object member = memberType(t, id, new HashSet<>());
            return member instanceof TypeInfo mt ? new Receiver(mt, true, null) : Receiver.UNKNOWN_RECEIVER;
        }
        return Receiver.UNKNOWN_RECEIVER;
    }

    private TypeInfo innermostType(Node node) {
        Node prev = node;
        for (Node n = node.getParentNode().orElse(null); n != null; prev = n, n = n.getParentNode().orElse(null)) {
            TypeInfo t = typeOf.get(n);
            if (t != null && insideBody(t, prev)) {
                return t;
            }
        }
        return null;
    }

    private TypeInfo enclosingNamed(Node node, String name) {
        String simple = name.substring(name.lastIndexOf('.') + 1);
        for (Node n = node.getParentNode().orElse(null); n != null; n = n.getParentNode().orElse(null)) {
            TypeInfo t = typeOf.get(n);
            if (t != null && t.named() && t.name.equals(simple)) {
                return t;
            }
        }
        return null;
    }

    /** The owner of the declaration a method call binds to, or null when not certain. */
    TypeInfo callTarget(MethodCallExpr call) {
        String name = call.getNameAsString();
        int arity = call.getArguments().size();
        if (call.getScope().isEmpty()) {
            Node prev = call;
            for (Node n = call.getParentNode().orElse(null); n != null; prev = n, n = n.getParentNode().orElse(null)) {
                TypeInfo t = typeOf.get(n);
                if (t == null || !insideBody(t, prev)) {
                    continue;
                }
                Lookup l = method(t, name, arity);
                if (l.how() == Certainty.FOUND) {
                    return l.owner();
                }
                if (l.how() == Certainty.UNCERTAIN) {
                    return null;
                }
            }
            return staticImport(fileOf(call), name, arity);
        }
        Expression scope = call.getScope().get();
        if (scope instanceof SuperExpr sup) {
            if (sup.getTypeName().isPresent()) {
                return null; // Interface.super.m(): left out
            }
            TypeInfo self = innermostType(call);
            if (self == null) {
                return null;
            }
            Lookup l = method(superclass(self), name, arity);
            return l.how() == Certainty.FOUND ? l.owner() : null;
        }
        Receiver r = receiver(scope);
        Lookup l = method(r.type(), name, arity);
        return l.how() == Certainty.FOUND ? l.owner() : null;
    }

    /** The superclass {@code super.m()} names: in the tree, or UNKNOWN. */
    private Object superclass(TypeInfo t) {
        if (t.node instanceof ClassOrInterfaceDeclaration c && !c.isInterface() && !c.getExtendedTypes().isEmpty()) {
            return resolveType(c.getExtendedTypes().get(0).asString(), c);
        }
        if (t.node instanceof ObjectCreationExpr creation) {
            Object r = resolveType(creation.getType().asString(), creation);
            return r instanceof TypeInfo rt && !rt.kind.equals("interface") ? r : UNKNOWN;
        }
        if (t.node instanceof EnumConstantDeclaration) {
            return supers(t).get(0);
        }
        return UNKNOWN;
    }

    private TypeInfo staticImport(FileInfo file, String name, int arity) {
        List<String> owners = file.staticSingle.get(name);
        if (owners != null) {
            if (owners.size() != 1) {
                return null;
            }
            Lookup l = method(known(owners.get(0)), name, arity);
            return l.how() == Certainty.FOUND ? l.owner() : null;
        }
        TypeInfo found = null;
        for (String owner : file.staticOnDemand) {
            Lookup l = method(known(owner), name, arity);
            if (l.how() == Certainty.UNCERTAIN || (l.how() == Certainty.FOUND && found != null)) {
                return null;
            }
            if (l.how() == Certainty.FOUND) {
                found = l.owner();
            }
        }
        return found;
    }

    /** The innermost emitted definition around a node: the caller of a call found there. */
    private String caller(Node node) {
        for (Node n = node.getParentNode().orElse(null); n != null; n = n.getParentNode().orElse(null)) {
            String q = defQualname.get(n);
            if (q != null) {
                return q;
            }
        }
        return null;
    }

    // ---------------------------------------------------------------- output

    String run() throws IOException {
        parseAll();
        // Overloads and other same-named definitions share one key: the first in the file keeps it.
        Map<String, Definition> definitions = new TreeMap<>();
        List<Definition> ordered = new ArrayList<>(rawDefinitions);
        ordered.sort((a, b) -> a.path().equals(b.path())
                ? (a.startLine() != b.startLine() ? Integer.compare(a.startLine(), b.startLine())
                : Integer.compare(a.startColumn(), b.startColumn()))
                : a.path().compareTo(b.path()));
        for (Definition d : ordered) {
            definitions.putIfAbsent(d.path() + "::" + d.qualname(), d);
        }
        Set<String> calls = new TreeSet<>();
        for (FileInfo file : files) {
            for (MethodCallExpr call : file.cu.findAll(MethodCallExpr.class)) {
                TypeInfo owner = callTarget(call);
                if (owner != null && owner.named()) {
                    addCall(calls, definitions, file, call, owner.file.path + "::" + owner.qualname + "."
                            + call.getNameAsString());
                }
            }
            for (ObjectCreationExpr creation : file.cu.findAll(ObjectCreationExpr.class)) {
                if (creation.getScope().isPresent()) {
                    continue;
                }
                // Like graphmem, a constructor call stands for the class being built.
                Object t = resolveType(creation.getType().asString(), creation);
                if (t instanceof TypeInfo owner && owner.named()) {
                    addCall(calls, definitions, file, creation, owner.file.path + "::" + owner.qualname);
                }
            }
        }
        StringBuilder out = new StringBuilder();
        out.append("{\"language\": \"java\",\n \"definitions\": [");
        boolean first = true;
        for (Definition d : definitions.values()) {
            out.append(first ? "\n  " : ",\n  ");
            first = false;
            out.append("{\"path\": ").append(json(d.path()))
                    .append(", \"qualname\": ").append(json(d.qualname()))
                    .append(", \"name\": ").append(json(d.name()))
                    .append(", \"kind\": ").append(json(d.kind()))
                    .append(", \"container\": ").append(d.container() == null ? "null" : json(d.container()))
                    .append(", \"start_line\": ").append(d.startLine())
                    .append(", \"end_line\": ").append(d.endLine())
                    .append(", \"doc\": ").append(json(d.doc()))
                    .append(", \"signature\": ").append(json(d.signature()))
                    .append(", \"body_sha\": ").append(json(d.bodySha()))
                    .append(", \"test\": ").append(d.test())
                    .append("}");
        }
        out.append("],\n \"calls\": [");
        first = true;
        for (String c : calls) {
            String[] pair = c.split("\n");
            out.append(first ? "\n  " : ",\n  ");
            first = false;
            out.append("{\"caller\": ").append(json(pair[0]))
                    .append(", \"callee\": ").append(json(pair[1])).append("}");
        }
        out.append("]}\n");
        return out.toString();
    }

    private void addCall(Set<String> calls, Map<String, Definition> definitions, FileInfo file, Node site,
                         String callee) {
        String callerQual = caller(site);
        if (callerQual == null) {
            return;
        }
        String callerKey = file.path + "::" + callerQual;
        if (definitions.containsKey(callerKey) && definitions.containsKey(callee)) {
            calls.add(callerKey + "\n" + callee);
        }
    }

    private static String json(String s) {
        StringBuilder out = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': out.append("\\\""); break;
                case '\\': out.append("\\\\"); break;
                case '\n': out.append("\\n"); break;
                case '\r': out.append("\\r"); break;
                case '\t': out.append("\\t"); break;
                default:
                    if (c < 0x20 || (c >= 0x7f && c <= 0x9f) || Character.isSurrogate(c)) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        return out.append('"').toString();
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 1) {
            System.err.println("usage: Oracle ROOT");
            System.exit(2);
        }
        byte[] out = new Oracle(Paths.get(args[0])).run().getBytes(StandardCharsets.UTF_8);
        System.out.write(out);
        System.out.flush();
    }
}
