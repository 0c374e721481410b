/**
 * The three.js engine of the dashboard: renderer, camera, orbit controls,
 * render-on-demand loop, fly-to animation, picking and screen projection.
 *
 * Why render on demand: the dashboard stays open all day; a continuous
 * requestAnimationFrame loop would keep a core (and, in software WebGL, all of
 * it) busy for a picture that changes twice a second. A frame is drawn only
 * when something asks for it (`invalidate`: a live frame, a camera move, an
 * animation step, a resize).
 *
 * `preserveDrawingBuffer` keeps the last frame readable, so browser tests can
 * check the canvas pixels (and screenshots show the scene). In a software
 * renderer (SwiftShader: CI, headless tests) there is no multisampling and the
 * shader programs are compiled while the first requests are in flight
 * (`warmUp`), so the first frame costs milliseconds, not half a second.
 */
import {
  BoxGeometry,
  BufferGeometry,
  CanvasTexture,
  Color,
  DirectionalLight,
  DoubleSide,
  Float32BufferAttribute,
  Group,
  HemisphereLight,
  InstancedMesh,
  LineBasicMaterial,
  LineSegments,
  Mesh,
  MeshBasicMaterial,
  MeshLambertMaterial,
  PerspectiveCamera,
  Raycaster,
  Scene,
  SRGBColorSpace,
  Sphere,
  Sprite,
  SpriteMaterial,
  Vector2,
  Vector3,
  WebGLRenderer,
  type Object3D,
} from "three";
import { OrbitControls } from "three/examples/jsm/controls/OrbitControls.js";

/** WebGL could not be initialised (no GPU, blocked, or no software fallback). */
export class WebGLUnavailable extends Error {
  constructor(reason: string) {
    super(`WebGL is not available: ${reason}`);
    this.name = "WebGLUnavailable";
  }
}

const CONTEXT: WebGLContextAttributes = {
  alpha: false, // the scene paints an opaque background: cheaper to composite
  depth: true,
  stencil: false,
  premultipliedAlpha: true,
  preserveDrawingBuffer: true,
  powerPreference: "high-performance",
};

/** Whether a context renders in software (SwiftShader, llvmpipe): every pixel costs CPU. */
export function isSoftware(gl: WebGL2RenderingContext): boolean {
  const info = gl.getExtension("WEBGL_debug_renderer_info");
  const renderer = String(gl.getParameter(info ? info.UNMASKED_RENDERER_WEBGL : gl.RENDERER) ?? "");
  return /swiftshader|llvmpipe|softpipe|software/i.test(renderer);
}

/**
 * A WebGL 2 canvas and context, or why there is none (no exception escapes:
 * three.js would log an error first). Multisampling only on a real GPU: in a
 * software renderer it multiplies the cost of every frame for a little
 * smoothness, so a context without it is made first and kept if it is software.
 */
export function createContext():
  { canvas: HTMLCanvasElement; gl: WebGL2RenderingContext; antialias: boolean } | string {
  try {
    const canvas = document.createElement("canvas");
    const gl = canvas.getContext("webgl2", { ...CONTEXT, antialias: false });
    if (!gl) return "this browser could not create a WebGL 2 context";
    if (isSoftware(gl)) return { canvas, gl, antialias: false };
    const smooth = document.createElement("canvas");
    const glAA = smooth.getContext("webgl2", { ...CONTEXT, antialias: true });
    if (!glAA) return { canvas, gl, antialias: false };
    gl.getExtension("WEBGL_lose_context")?.loseContext();
    return { canvas: smooth, gl: glAA, antialias: true };
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

const BACKGROUND = new Color(0x0f1319);

interface Flight {
  from: Vector3;
  to: Vector3;
  fromTarget: Vector3;
  toTarget: Vector3;
  start: number;
  ms: number;
  done: () => void;
}

export class Engine {
  readonly renderer: WebGLRenderer;
  readonly scene = new Scene();
  readonly camera: PerspectiveCamera;
  readonly controls: OrbitControls;
  readonly raycaster = new Raycaster();
  /** performance.now() of the first frame drawn with content (a view), null before. */
  firstFrameAt: number | null = null;
  /** Frames drawn (for tests and the idle check). */
  renders = 0;
  /** Rendering in software (SwiftShader): no multisampling. */
  readonly software: boolean;
  private pending = false;
  private warmed = false;
  /** How long the shader warm-up took (ms), for the curious. */
  warmupMs: number | null = null;
  private flight: Flight | null = null;
  private content: Object3D | null = null;
  private readonly afterRender: Array<() => void> = [];
  private readonly resizeObserver: ResizeObserver;
  private readonly ndc = new Vector2();

  constructor(readonly container: HTMLElement) {
    const made = createContext();
    if (typeof made === "string") throw new WebGLUnavailable(made);
    try {
      this.renderer = new WebGLRenderer({
        canvas: made.canvas,
        context: made.gl,
        antialias: made.antialias,
        preserveDrawingBuffer: true,
      });
    } catch (error) {
      throw new WebGLUnavailable(error instanceof Error ? error.message : String(error));
    }
    this.software = !made.antialias && isSoftware(made.gl);
    this.renderer.setPixelRatio(Math.min(window.devicePixelRatio || 1, 2));
    this.renderer.setClearColor(BACKGROUND, 1);
    this.renderer.domElement.setAttribute("aria-label", "3D view of the cluster");
    this.renderer.domElement.tabIndex = 0;
    container.prepend(this.renderer.domElement);

    this.camera = new PerspectiveCamera(45, 1, 0.1, 5000);
    this.camera.position.set(0, 40, 60);
    this.scene.background = BACKGROUND;
    this.scene.add(new HemisphereLight(0xdfe8ff, 0x2a2f38, 2.2));
    const sun = new DirectionalLight(0xffffff, 1.6);
    sun.position.set(-0.6, 1, 0.8);
    this.scene.add(sun);

    this.controls = new OrbitControls(this.camera, this.renderer.domElement);
    this.controls.enableDamping = false;
    this.controls.screenSpacePanning = true;
    this.controls.addEventListener("change", () => this.invalidate());
    this.controls.addEventListener("start", () => {
      this.flight = null;
    });

    this.resizeObserver = new ResizeObserver(() => this.resize());
    this.resizeObserver.observe(container);
    this.resize();
  }

  /** Ask for one frame (coalesced: several calls before it is drawn draw one). */
  invalidate(): void {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(this.frame);
  }

  /** Resolve after the next frame is drawn. */
  nextFrame(): Promise<void> {
    return new Promise((resolve) => {
      this.afterRender.push(resolve);
      this.invalidate();
    });
  }

  private readonly frame = (now: number): void => {
    this.pending = false;
    if (this.flight) this.stepFlight(now);
    this.renderer.render(this.scene, this.camera);
    this.renders += 1;
    if (this.firstFrameAt === null && this.content) {
      this.firstFrameAt = performance.now();
      performance.mark("twin:first-frame");
    }
    const waiting = this.afterRender.splice(0);
    for (const fn of waiting) fn();
  };

  private resize(): void {
    const w = Math.max(1, this.container.clientWidth);
    const h = Math.max(1, this.container.clientHeight);
    this.renderer.setSize(w, h, true);
    this.camera.aspect = w / h;
    this.camera.updateProjectionMatrix();
    this.invalidate();
  }

  /** Replace what is drawn (the previous content is removed, not disposed). */
  setContent(object: Object3D | null): void {
    if (this.content) this.scene.remove(this.content);
    this.content = object;
    if (object) this.scene.add(object);
    this.invalidate();
  }

  /**
   * Put the camera where `sphere` fills the view, looking from `direction`
   * (towards the target), and fit the clipping planes to its size.
   */
  home(sphere: Sphere, direction: Vector3): void {
    this.flight = null;
    const distance = this.fitDistance(sphere.radius);
    this.camera.near = Math.max(0.05, sphere.radius / 500);
    this.camera.far = Math.max(100, distance * 4 + sphere.radius * 4);
    this.camera.updateProjectionMatrix();
    this.controls.target.copy(sphere.center);
    this.camera.position.copy(direction).normalize().multiplyScalar(distance).add(sphere.center);
    this.controls.minDistance = Math.max(0.5, sphere.radius / 200);
    this.controls.maxDistance = distance * 3;
    this.controls.update();
    this.invalidate();
  }

  /** Camera distance at which a sphere of `radius` fits the narrower field of view. */
  fitDistance(radius: number): number {
    const vfov = (this.camera.fov * Math.PI) / 180;
    const hfov = 2 * Math.atan(Math.tan(vfov / 2) * this.camera.aspect);
    return (radius / Math.sin(Math.min(vfov, hfov) / 2)) * 1.05;
  }

  /**
   * Animate the camera to look at `target` from `distance`, keeping the current
   * viewing direction; resolves when it arrives (at once with `ms` = 0).
   */
  flyTo(target: Vector3, distance: number, ms = 650): Promise<void> {
    const dir = this.camera.position.clone().sub(this.controls.target);
    if (dir.lengthSq() < 1e-9) dir.set(0, 1, 1);
    dir.normalize().multiplyScalar(distance);
    const to = target.clone().add(dir);
    if (ms <= 0) {
      this.controls.target.copy(target);
      this.camera.position.copy(to);
      this.controls.update();
      this.invalidate();
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.flight?.done();
      this.flight = {
        from: this.camera.position.clone(),
        to,
        fromTarget: this.controls.target.clone(),
        toTarget: target.clone(),
        start: performance.now(),
        ms,
        done: resolve,
      };
      this.invalidate();
    });
  }

  private stepFlight(now: number): void {
    const f = this.flight as Flight;
    const t = Math.min(1, Math.max(0, (now - f.start) / f.ms));
    const e = t < 0.5 ? 4 * t * t * t : 1 - (-2 * t + 2) ** 3 / 2; // ease in-out cubic
    this.camera.position.lerpVectors(f.from, f.to, e);
    this.controls.target.lerpVectors(f.fromTarget, f.toTarget, e);
    this.camera.lookAt(this.controls.target);
    if (t >= 1) {
      this.flight = null;
      this.controls.update();
      f.done();
    } else {
      this.invalidate();
    }
  }

  /**
   * Compile the shader programs the views use, by drawing one tiny object per
   * material kind once, while the page still waits for the network. In a
   * software renderer a program (and its pipeline) costs tens of milliseconds
   * on its first draw; this moves that out of the first real frame. The
   * materials are kept, so three.js keeps their programs.
   */
  warmUp(): void {
    if (this.content || this.warmed) return;
    this.warmed = true;
    const t0 = performance.now();
    const group = new Group();
    const box = new BoxGeometry(1, 1, 1);
    const instanced = new InstancedMesh(box, new MeshLambertMaterial({ color: 0xffffff }), 1);
    instanced.setColorAt(0, new Color(0xffffff));
    const texture = new CanvasTexture(document.createElement("canvas"));
    texture.colorSpace = SRGBColorSpace;
    const line = new BufferGeometry();
    line.setAttribute("position", new Float32BufferAttribute([0, 0, 0, 0, 1, 0], 3));
    line.setAttribute("color", new Float32BufferAttribute([1, 1, 1, 1, 1, 1], 3));
    group.add(
      instanced,
      new Mesh(box, new MeshLambertMaterial({ color: 0xffffff })),
      new Mesh(box, new MeshBasicMaterial({ color: 0xffffff })),
      new Mesh(
        box,
        new MeshBasicMaterial({
          color: 0xffffff,
          transparent: true,
          opacity: 0.5,
          side: DoubleSide,
          depthWrite: false,
        }),
      ),
      new Mesh(box, new MeshBasicMaterial({ color: 0xffffff, transparent: true, depthTest: false })),
      new LineSegments(line, new LineBasicMaterial({ color: 0xffffff })),
      new LineSegments(line, new LineBasicMaterial({ color: 0xffffff, transparent: true, opacity: 0.5 })),
      new LineSegments(line, new LineBasicMaterial({ vertexColors: true, transparent: true, opacity: 0.7 })),
      new Sprite(new SpriteMaterial({ map: texture, transparent: true, depthWrite: false })),
    );
    // Far too small to cover a pixel, right in front of the camera: drawn, not seen.
    group.scale.setScalar(1e-4);
    group.position.copy(this.controls.target);
    this.scene.add(group);
    this.renderer.render(this.scene, this.camera);
    this.scene.remove(group);
    this.warmupMs = performance.now() - t0;
  }

  /** Point the raycaster through a viewport point (CSS px); false if outside the canvas. */
  aim(clientX: number, clientY: number): boolean {
    const rect = this.renderer.domElement.getBoundingClientRect();
    if (clientX < rect.left || clientX > rect.right || clientY < rect.top || clientY > rect.bottom) return false;
    this.ndc.set(((clientX - rect.left) / rect.width) * 2 - 1, -((clientY - rect.top) / rect.height) * 2 + 1);
    this.raycaster.setFromCamera(this.ndc, this.camera);
    return true;
  }

  /** A world point in CSS px of the viewport; null if behind the camera or off the canvas. */
  project(point: Vector3): { x: number; y: number } | null {
    const v = point.clone().project(this.camera);
    if (v.z < -1 || v.z > 1 || Math.abs(v.x) > 1 || Math.abs(v.y) > 1) return null;
    const rect = this.renderer.domElement.getBoundingClientRect();
    return { x: rect.left + ((v.x + 1) / 2) * rect.width, y: rect.top + ((1 - v.y) / 2) * rect.height };
  }

  dispose(): void {
    this.resizeObserver.disconnect();
    this.controls.dispose();
    this.renderer.dispose();
    this.renderer.domElement.remove();
  }
}
