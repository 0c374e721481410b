/**
 * Text in the 3D scene as sprites with a canvas texture: supernode names on the
 * floor, network tier names above it. Few of them (a view caps how many it
 * makes), so one small texture each is fine.
 */
import { CanvasTexture, LinearFilter, SRGBColorSpace, Sprite, SpriteMaterial } from "three";

export interface LabelOptions {
  /** Height of the text in world units. */
  height: number;
  colour?: string;
  background?: string;
  bold?: boolean;
}

/** A sprite showing `text`, `height` world units tall, always facing the camera. */
export function makeLabel(text: string, opts: LabelOptions): Sprite {
  const px = 48;
  const pad = 14;
  const canvas = document.createElement("canvas");
  const ctx = canvas.getContext("2d") as CanvasRenderingContext2D;
  const font = `${opts.bold ? "600 " : ""}${px}px system-ui, -apple-system, "Segoe UI", sans-serif`;
  ctx.font = font;
  const width = Math.ceil(ctx.measureText(text).width) + pad * 2;
  canvas.width = width;
  canvas.height = px + pad * 2;
  ctx.font = font;
  if (opts.background) {
    ctx.fillStyle = opts.background;
    const r = 12;
    ctx.beginPath();
    ctx.roundRect(0, 0, canvas.width, canvas.height, r);
    ctx.fill();
  }
  ctx.fillStyle = opts.colour ?? "#e6e9ee";
  ctx.textBaseline = "middle";
  ctx.fillText(text, pad, canvas.height / 2 + 2);
  const texture = new CanvasTexture(canvas);
  texture.colorSpace = SRGBColorSpace;
  texture.minFilter = LinearFilter;
  texture.generateMipmaps = false;
  const sprite = new Sprite(new SpriteMaterial({ map: texture, transparent: true, depthWrite: false }));
  const h = opts.height * (canvas.height / px);
  sprite.scale.set((h * canvas.width) / canvas.height, h, 1);
  sprite.userData.label = text;
  return sprite;
}
